"""Shared fixtures: a real, private PostgreSQL server for the tests marked `postgres`;
the Debian cloud kernels of the tests marked `vm`."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from noise import SET_NOISE
from perfline.system.pgserver import PrivateServer
from perfline.system.process import ToolMissing
from perfline.targets.kernels import CACHE_ENV, Kernel
from perfline.targets.machine_settings import SETTINGS_ENV


@pytest.fixture(scope="session", autouse=True)
def machine_settings_elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """No test can opt this machine into target kexec: perfline's machine settings, for
    every test and every perfline it starts, are a file in a temporary directory."""
    path = tmp_path_factory.mktemp("machine-settings") / "machine.yaml"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SETTINGS_ENV, str(path))
        yield path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # `-m postgres` / `-m "not postgres"` must select every test that starts the server,
    # also one whose author forgot the mark.
    for item in items:
        if "postgres_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateServer]:
    """One private server for the whole session, on a free loopback port.

    A missing PostgreSQL fails the tests instead of skipping them: a skipped store test
    would look like a passing one.
    """
    try:
        # The data is thrown away after the session; not syncing it makes the tests faster.
        server = PrivateServer(tmp_path_factory.mktemp("postgres"), settings={"fsync": "off"})
    except ToolMissing as exc:
        pytest.fail(f"{exc}\n(`make test` installs postgresql)", pytrace=False)
    with server:
        yield server


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PrivateServer) -> str:
    """SQLAlchemy URL of a database created for this session."""
    return postgres_server.create_database("perfline_test")


@pytest.fixture(scope="session")
def debian_kernels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Kernel]:
    """Debian 12's 6.1 and 6.12 cloud kernels by name, registered the way the qemu target
    tests register them (apt downloads each once into their fixed cache, kept between
    runs). Their images are real kernels for tests that need two that differ."""
    # The download helper lives with the qemu target tests; shared from there, not copied.
    from test_qemu_target import KERNEL_61, KERNEL_612, TEST_CACHE, registered

    scratch = tmp_path_factory.mktemp("debian-kernels")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(TEST_CACHE))
        return {name: registered(name, package, scratch) for name, package in (KERNEL_61, KERNEL_612)}


def free_port() -> int:
    """A TCP port on loopback nobody listens on now (for servers the tests start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Hostile strings the store may hold: a commit subject and a run label. Every page and
# report must show them as text.
SCRIPT_SUBJECT = "<script>window.pwned=1</script>"
LABEL_ATTACK = "\"><img src=x onerror=\"window.pwned=1\">"


@pytest.fixture(scope="session")
def tracked_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tracked history with one regression narrowed to commit 41 (examples/track), whose
    culprit's subject is `sched/eevdf: <script>…`, whose job's command carries a
    quote-breaking string, plus one run labelled with LABEL_ATTACK. Read-only: a test
    that changes it works on a copy."""
    root = Path(__file__).resolve().parents[1]
    where = tmp_path_factory.mktemp("tracked")
    subprocess.run([str(root / "examples" / "bisect" / "make-repo.sh"), str(where / "src")], check=True,
                   env={**os.environ, "CULPRIT_SUBJECT": f"sched/eevdf: {SCRIPT_SUBJECT}"})
    # A YAML single-quoted scalar: its only escape is '' for '.
    command = "'" + f"$PERFLINE_TREE/bench # {LABEL_ATTACK}".replace("'", "''") + "'"
    text = (root / "examples" / "track" / "demo.yaml").read_text().replace("cmd: $PERFLINE_TREE/bench",
                                                                            f"cmd: {command}")
    (where / "tracker.yaml").write_text(text)
    # The tracker's logic is what these stores are for: bench.c's noise is set, not timed.
    env = {**os.environ, **SET_NOISE, "PERFLINE_CACHE_DIR": str(where / "cache")}
    perfline = [sys.executable, "-m", "perfline", "--db", str(where / "db")]
    proc = subprocess.run([*perfline, "track", "run", "tracker.yaml", "--once"],
                          capture_output=True, text=True, cwd=where, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    labelled = subprocess.run([*perfline, "run", "command", "-p", "cmd=echo 1", "--repeat", "5", "--warmup", "0",
                               "--no-monitors", "--label", LABEL_ATTACK], capture_output=True, text=True, cwd=where,
                              env=env, timeout=300, check=False)
    assert labelled.returncode == 0, labelled.stderr
    return where


def copy_tracked(tracked: Path, where: Path, *, cache: bool = False) -> Path:
    """A copy of a tracked history for a test that changes it: its files (perfline's
    cache too if `cache`), its store through SQLite's backup. A copy of the store's files
    raced a connection closing, whose db-wal went away in the middle of the copy."""
    skipped = {"db", "db-wal", "db-shm"} if cache else {"db", "db-wal", "db-shm", "cache"}

    def top_level(directory: str, names: list[str]) -> set[str]:
        # Only there: a pattern would skip src/.git/objects/db, an object directory too.
        return skipped & set(names) if Path(directory) == tracked else set()

    shutil.copytree(tracked, where, symlinks=True, ignore=top_level)
    with closing(sqlite3.connect(tracked / "db")) as source, closing(sqlite3.connect(where / "db")) as copy:
        source.backup(copy)
    return where
