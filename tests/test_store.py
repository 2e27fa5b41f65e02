"""The result store against a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from perfline.analysis.comparison import Side
from perfline.records.job import Case
from perfline.records.metric import Direction, Measurement, Metric
from perfline.records.status import RunStatus
from perfline.store import RunNotFound, Store, migrate
from perfline.store.engine import StoreUnavailable, connect, resolve_url
from perfline.store.schema import Base
from perfline.targets import local

THROUGHPUT = Metric("tbench.throughput", "MB/s", Direction.HIGHER, "tbench throughput")
CTXT = Metric("proc-stat.ctxt_per_s", "/s", Direction.NEUTRAL)

CASE = Case(
    job="tbench",
    benchmark="tbench",
    params={"clients": 2, "duration": 1},
    tunables={"sysctl": {"kernel.sched_autogroup_enabled": 0}},
    repeat=3,
    warmup=1,
    monitors=("proc-stat",),
    target="local",
)


def round_trip(store: Store) -> None:
    fingerprint = local.fingerprint()
    run_id = store.start_run(CASE, fingerprint, label="v6.7", kernel_commit="abc123", pid=1)
    store.set_settings(run_id, {"pinned": "0,1", "vm_kernel": "debian-6.1"})
    for rep, value in enumerate([100.0, 102.5, 99.0]):
        store.add_samples(run_id, rep, [Measurement(THROUGHPUT, value)], "benchmark")
        store.add_samples(run_id, rep, [Measurement(CTXT, 5000.0 + rep)], "monitor")
    store.finish_run(run_id, RunStatus.COMPLETED)

    detail = store.get_run(run_id)
    assert detail.info.status == RunStatus.COMPLETED
    assert detail.info.samples == 3
    assert detail.info.case_key == "clients=2,duration=1,sysctl:kernel.sched_autogroup_enabled=0"
    assert detail.info.label == "v6.7" and detail.info.kernel_commit == "abc123"
    assert detail.settings == {"pinned": "0,1", "vm_kernel": "debian-6.1"}
    # The kernel a VM booted is found in the settings JSON, by SQLite and PostgreSQL alike.
    assert run_id in store.find_runs(vm_kernel="debian-6.1") and not store.find_runs(vm_kernel="debian-6.12")
    assert "debian-6.1" in store.vm_kernels()
    assert detail.tunables == {"sysctl": {"kernel.sched_autogroup_enabled": 0}}
    bench = [s.value for s in detail.samples if s.source == "benchmark"]
    assert bench == [100.0, 102.5, 99.0]
    assert {s.metric for s in detail.samples} == {THROUGHPUT, CTXT}
    assert detail.fingerprint["kernel_release"] == fingerprint.kernel_release
    assert detail.fingerprint["cpu_count"] == fingerprint.cpu_count
    if fingerprint.config_hash:
        assert store.kernel_config(fingerprint.config_hash) == fingerprint.kernel_config

    listed = store.list_runs()
    assert [r.id for r in listed][0] == run_id
    assert listed[0].samples == 3

    with pytest.raises(RunNotFound, match="perfline runs"):
        store.get_run(run_id + 1000)


def test_sqlite_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "perfline.db"
    store = Store.open(f"sqlite:///{path}")
    round_trip(store)
    store.close()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


@pytest.mark.postgres
def test_postgresql_round_trip(postgres_url: str) -> None:
    store = Store.open(postgres_url)
    round_trip(store)
    # Opening again finds the schema current and keeps the data.
    again = Store.open(postgres_url)
    assert again.list_runs()
    again.close()
    store.close()


def test_kernel_config_is_stored_once(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    fingerprint = local.fingerprint()
    if fingerprint.kernel_config is None:
        pytest.skip("this kernel exposes no config (/proc/config.gz or /boot/config-*)")
    for _ in range(3):
        store.start_run(CASE, fingerprint, pid=1)
    count = sqlite3.connect(tmp_path / "db.sqlite").execute(
        "SELECT count(*) FROM kernel_configs"
    ).fetchone()[0]
    assert count == 1


def _commits_kept_once(store: Store) -> None:
    from datetime import datetime

    from perfline.git import Commit

    first = [Commit(f"{i:040x}", f"change {i}", "Dev", datetime.fromisoformat("2026-11-26T10:00:00+01:00"))
             for i in range(1200)]  # more than one chunk of the IN (...) and of the INSERT
    assert store.remember_commits(first) == 1200
    # Seen again, renamed and with newer ones: the first sighting stays.
    again = [Commit(c.sha, "rewritten", "Other") for c in first[:10]] + [Commit(f"{9999:040x}", "new", "Dev")]
    assert store.remember_commits(again) == 1
    kept = store.stored_commits([c.sha for c in first] + [f"{9999:040x}", "f" * 40])
    assert len(kept) == 1201 and "f" * 40 not in kept
    assert kept[first[7].sha] == first[7] and kept[first[7].sha].date.isoformat() == "2026-11-26T10:00:00+01:00"
    assert kept[f"{9999:040x}"] == Commit(f"{9999:040x}", "new", "Dev", None)


def test_commits_are_kept_once_sqlite(tmp_path: Path) -> None:
    _commits_kept_once(Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}"))


@pytest.mark.postgres
def test_commits_are_kept_once_postgresql(postgres_url: str) -> None:
    store = Store.open(postgres_url)
    _commits_kept_once(store)
    store.close()


def test_migrations_match_schema(tmp_path: Path) -> None:
    """A schema change without a migration would break every existing store."""
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with store.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_head_revision_is_alembics(tmp_path: Path) -> None:
    """Store.open skips alembic when a store is at migrate.head_revision(), read from the
    file names: it must be the head alembic would upgrade to."""
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with store.engine.connect() as connection:
        scripts = ScriptDirectory.from_config(migrate.alembic_config(connection))
        assert migrate.head_revision() == scripts.get_current_head() == migrate.current_revision(connection)
        assert migrate.revisions() == {script.revision for script in scripts.walk_revisions()}


def test_a_store_from_a_newer_perfline_is_refused_and_left_alone(tmp_path: Path) -> None:
    """A revision none of the migrations has is a newer perfline's: opening the store is a
    user error naming it (alembic's own refusal was an internal error), and the store keeps
    its revision and its runs."""
    db = tmp_path / "db.sqlite"
    store = Store.open(str(db))
    run_id = store.start_run(CASE, local.fingerprint(), pid=1)
    store.close()
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreUnavailable, match=f"{db}: cannot open the store: its schema is at revision 9999, "
                                               f"which this perfline \\(schema {migrate.head_revision()}\\)"):
        Store.open(str(db))
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [("9999",)]
        assert connection.execute("SELECT id FROM runs").fetchall() == [(run_id,)]


def test_get_runs_reads_samples_as_columns_in_the_order_asked(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    ids = []
    for level in (1.0, 2.0, 3.0):
        run_id = store.start_run(CASE, local.fingerprint(), pid=1)
        for rep in range(3):
            store.add_samples(run_id, rep, [Measurement(THROUGHPUT, level + rep)], "benchmark")
            store.add_samples(run_id, rep, [Measurement(CTXT, 10 * level + rep)], "monitor")
        store.finish_run(run_id, RunStatus.COMPLETED)
        ids.append(run_id)
    order = [ids[2], ids[0], ids[1]]
    read = store.get_runs(order)
    assert [r.info.id for r in read.runs] == order
    assert all(r.info.samples == 3 and not r.samples for r in read.runs)
    assert list(read.columns) == [THROUGHPUT.name, CTXT.name]
    column = read.columns[THROUGHPUT.name]
    assert (column.metric, column.source) == (THROUGHPUT, "benchmark")
    assert column.values.tolist() == [3.0, 4.0, 5.0, 1.0, 2.0, 3.0, 2.0, 3.0, 4.0]
    assert column.runs.tolist() == [ids[2]] * 3 + [ids[0]] * 3 + [ids[1]] * 3
    # A side made of whole runs (compare 12 15) gathers the same columns from their samples.
    side = Side("runs", [store.get_run(i) for i in order])
    assert side.metrics() == {name: (c.metric, c.source) for name, c in read.columns.items()}
    for name, c in read.columns.items():
        assert list(side.values(name)) == c.values.tolist() and list(side.run_labels(name)) == c.runs.tolist()


def test_migration_0005_marks_existing_kernel_bisections(tmp_path: Path) -> None:
    """Kernel bisections started before the column are found by their build command's
    first line, which named the config copy; others get no kernel config."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    engine = connect(url)
    with engine.begin() as connection:
        command.upgrade(migrate.alembic_config(connection), "0004")
    kernel_build = "# perfline kernel build: config '/cache/bisect/configs/ab 12.config'\ncp ...\n"
    with sqlite3.connect(tmp_path / "db.sqlite") as connection:
        for build in (kernel_build, "make -j2"):
            connection.execute(
                "INSERT INTO bisections (repo, good, bad, commits, build, metric, direction, max_runs, status, "
                "created_at, updated_at) VALUES ('/r', 'a', 'b', '[]', ?, 'command.value', 'lower', 10, "
                "'running', '2026-01-01', '2026-01-01')", (build,))
    engine.dispose()
    store = Store.open(url)
    kernel_bisection, plain = store.bisection(1).spec, store.bisection(2).spec
    assert (kernel_bisection.kernel_config, kernel_bisection.kernel_config_source) == (
        "/cache/bisect/configs/ab 12.config", None)
    assert plain.kernel_config is None


def test_dead_runs_are_marked_interrupted(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    fingerprint = local.fingerprint()
    dead = store.start_run(CASE, fingerprint, pid=11)
    alive = store.start_run(CASE, fingerprint, pid=22)
    store.add_samples(dead, 0, [Measurement(THROUGHPUT, 1.0)], "benchmark")
    reaped = store.reap_dead_runs(fingerprint.boot_id, fingerprint.hostname, lambda pid: pid == 22)
    assert reaped == 1
    assert store.get_run(dead).info.status == RunStatus.INTERRUPTED
    assert store.get_run(dead).info.samples == 1
    assert store.get_run(alive).info.status == RunStatus.RUNNING


def test_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PERFLINE_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert resolve_url() == f"sqlite:///{tmp_path}/perfline/perfline.db"
    monkeypatch.setenv("PERFLINE_DB", str(tmp_path / "x.db"))
    assert resolve_url() == f"sqlite:///{tmp_path}/x.db"
    monkeypatch.setenv("PERFLINE_DB", "postgresql+psycopg://u@127.0.0.1:5/db")
    assert resolve_url() == "postgresql+psycopg://u@127.0.0.1:5/db"


def test_a_migration_cut_short_leaves_no_half_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill in the middle of creating a store's schema left some tables without the
    revision stamp, and every later open failed ("table kernel_configs already exists",
    bench/track_chaos.py). The upgrade is one transaction: cut short (here by an error
    once the first migration has created its tables), it leaves nothing, and the next
    open makes the store whole."""
    from alembic.operations import Operations

    created = Operations.create_table

    def create_then_fail(self: Operations, name: str, *columns: object, **kw: object) -> object:
        if name == "bisections":  # migration 0004: tables of 0001-0003 exist by now
            raise RuntimeError("killed")
        return created(self, name, *columns, **kw)

    db = tmp_path / "s.db"
    monkeypatch.setattr(Operations, "create_table", create_then_fail)
    with pytest.raises(RuntimeError, match="killed"):
        Store.open(str(db))
    monkeypatch.undo()
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall() == []
    Store.open(str(db)).close()
