"""The private PostgreSQL server: really started, really reachable, really gone afterwards."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from perfline.system import pgserver
from perfline.system.pgserver import PrivateServer, ServerFailed
from perfline.system.process import ToolMissing


def select_one(url: str) -> tuple[int, str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            row = conn.execute(sa.text("SELECT 1, current_database()")).one()
            return row[0], row[1]
    finally:
        engine.dispose()


def port_is_closed(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        return probe.connect_ex((pgserver.HOST, port)) != 0


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A base directory every user can enter, so the server keeps its data inside it."""
    with tempfile.TemporaryDirectory(prefix="perfline-test-") as name:
        os.chmod(name, 0o755)
        yield Path(name)


@pytest.mark.postgres
def test_round_trip_and_cleanup(open_dir: Path) -> None:
    base = open_dir / "pg"
    with PrivateServer(base) as server:
        data_dir, port = server.data_dir, server.port
        assert data_dir == base / "data"
        assert (data_dir / "PG_VERSION").is_file()
        assert server.url("mydb") == f"postgresql+psycopg://{server.user}@127.0.0.1:{port}/mydb"
        assert select_one(server.url("postgres")) == (1, "postgres")
        assert select_one(server.create_database("mydb")) == (1, "mydb")
    assert not data_dir.exists()
    assert not (base / "run").exists()
    assert port_is_closed(port)
    # The log stays for a post-mortem.
    assert (base / "postgres.log").is_file()


@pytest.mark.postgres
def test_two_servers_run_side_by_side(tmp_path: Path) -> None:
    with PrivateServer(tmp_path / "a") as first, PrivateServer(tmp_path / "b") as second:
        assert first.port != second.port
        assert first.data_dir != second.data_dir
        assert select_one(first.url("postgres")) == (1, "postgres")
        assert select_one(second.url("postgres")) == (1, "postgres")
        first_dir = first.data_dir
    assert not first_dir.exists()


@pytest.mark.postgres
@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the server to another user")
def test_root_unreachable_base_dir_gets_a_temp_home(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with PrivateServer(private / "pg") as server:
        home = server.data_dir.parent
        assert not home.is_relative_to(private)
        assert select_one(server.url("postgres")) == (1, "postgres")
    assert not home.exists()
    assert (private / "pg" / "postgres.log").is_file()


@pytest.mark.postgres
def test_port_in_use_fails_with_log_tail_and_cleans_up(open_dir: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((pgserver.HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = PrivateServer(open_dir / "pg", port=port)
        with pytest.raises(ServerFailed) as failure:
            server.start()
    assert "exited" in failure.value.reason
    assert "could not bind" in failure.value.output_tail
    assert "could not bind" in str(failure.value)
    assert not server.data_dir.exists()
    assert server.pid is None


def test_missing_binaries_name_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pgserver, "DEBIAN_ROOT", tmp_path / "none")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissing, match="postgresql"):
        PrivateServer(tmp_path / "pg")


def test_newest_debian_version_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for version in ("9.6", "15", "16", "notaversion"):
        bindir = tmp_path / version / "bin"
        bindir.mkdir(parents=True)
        for tool in pgserver.SERVER_TOOLS:
            (bindir / tool).write_text("#!/bin/sh\n")
            (bindir / tool).chmod(0o755)
    # A newer version without its server binaries (only the client package) is not usable.
    (tmp_path / "17" / "bin").mkdir(parents=True)
    monkeypatch.setattr(pgserver, "DEBIAN_ROOT", tmp_path)
    assert pgserver.find_bindir() == tmp_path / "16" / "bin"
