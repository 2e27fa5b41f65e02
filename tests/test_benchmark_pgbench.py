"""pgbench against a real private server, and its output parser on real pgbench output."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfline.benchmarks import BENCHMARKS, BenchmarkFailed
from perfline.benchmarks.pgbench import LATENCY_AVG, TPS, Pgbench, parse_output

# pgbench 15.18 (Debian 12), -T 2 -c 2 -j 1 -b tpcb-like.
PGBENCH_15_OUTPUT = """\
pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 10
query mode: simple
number of clients: 2
number of threads: 1
maximum number of tries: 1
duration: 2 s
number of transactions actually processed: 3357
number of failed transactions: 0 (0.000%)
latency average = 1.190 ms
initial connection time = 4.975 ms
tps = 1680.435862 (without initial connection time)
"""

# The summary of PostgreSQL 13 and older, which counts connection set-up in the first line.
PGBENCH_13_SUMMARY = """\
number of transactions actually processed: 1200
latency average = 1.667 ms
tps = 590.101010 (including connections establishing)
tps = 600.202020 (excluding connections establishing)
"""


def test_parse_pgbench_15_output() -> None:
    assert {(m.metric, m.value) for m in parse_output(PGBENCH_15_OUTPUT)} == {
        (TPS, 1680.435862),
        (LATENCY_AVG, 1.190),
    }


def test_parse_older_output_takes_tps_without_connection_set_up() -> None:
    assert {(m.metric, m.value) for m in parse_output(PGBENCH_13_SUMMARY)} == {
        (TPS, 600.202020),
        (LATENCY_AVG, 1.667),
    }


def test_parse_output_without_summary_fails_with_tail() -> None:
    with pytest.raises(BenchmarkFailed) as failure:
        parse_output("pgbench (15.18)\nstarting vacuum...end.\n")
    assert "starting vacuum" in failure.value.output_tail


def test_registered() -> None:
    assert BENCHMARKS.get("pgbench") is Pgbench


def children_of(pid: int) -> set[int]:
    children = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # The command name in /proc/PID/stat may hold spaces; the ppid follows the state.
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[1]) == pid:
                children.add(int(entry.name))
    return children


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


@pytest.mark.postgres
def test_pgbench_runs_for_real_and_stops_its_server(tmp_path: Path) -> None:
    bench = Pgbench({"scale": 1, "duration": 2, "clients": 1}, tmp_path)
    with bench:
        assert bench.server is not None
        server = bench.server
        data_dir, postmaster = server.data_dir, server.pid
        assert postmaster is not None
        server_processes = {postmaster, *children_of(postmaster)}
        assert len(server_processes) > 1  # checkpointer, walwriter, ... run beside it
        measured = {m.metric: m.value for m in bench.run_once()}
        assert bench.settings()["postgres_version"].startswith("postgres (PostgreSQL)")
    assert measured[TPS] > 0
    assert measured[LATENCY_AVG] > 0
    assert not any(alive(pid) for pid in server_processes)
    assert not data_dir.exists()
    assert server.pid is None


@pytest.mark.postgres
def test_pgbench_failure_carries_output_tail(tmp_path: Path) -> None:
    bench = Pgbench({"duration": 1, "clients": 1}, tmp_path)
    with bench:
        assert bench.server is not None
        bench.server.stop()
        with pytest.raises(BenchmarkFailed) as failure:
            bench.run_once()
    assert "pgbench" in str(failure.value)
    assert failure.value.output_tail
