"""The command line end to end: real processes, a real SQLite store, real signals."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def perfline(db: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "perfline", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"perfline {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def start(db: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "perfline", "--db", str(db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stored_samples(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as connection:
        try:
            query = "SELECT count(*) FROM samples WHERE source='benchmark'"
            return connection.execute(query).fetchone()[0]
        except sqlite3.OperationalError:  # perfline is still creating the schema
            return 0


def wait_for_samples(db: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while stored_samples(db) < count:
        assert proc.poll() is None, f"perfline exited early: {proc.communicate()[1]}"
        assert time.monotonic() < deadline, "no samples stored within 120 s"
        time.sleep(0.05)


def test_list_names_every_benchmark_and_monitor(tmp_path: Path) -> None:
    out = perfline(tmp_path / "db", "list").stdout
    for name in ("ftrace-switch", "ftrace-events", "rcu-gp", "sched-pipe", "hackbench", "tbench",
                 "cpu-latency", "cyclictest", "pgbench", "command", "proc-stat", "vmstat",
                 "perf-stat", "migration-cost"):
        assert name in out
    assert "unavailable" not in out


def test_run_stores_samples_runs_and_show(tmp_path: Path) -> None:
    db = tmp_path / "perfline.db"
    out = perfline(
        db, "run", "command", "-p", "cmd=sleep 0.05; echo 41; echo 42", "-p", "unit=ops",
        "--repeat", "3", "--warmup", "1", "--monitor", "proc-stat", "--label", "demo",
        "--kernel-commit", "deadbeef", "--json",
    ).stdout
    [run] = json.loads(out)
    assert run["status"] == "completed"
    assert run["repetitions"] == 3
    assert run["summary"]["command.value"]["mean"] == 42.0
    assert run["summary"]["command.value"]["n"] == 3
    assert run["summary"]["proc-stat.idle_pct"]["source"] == "monitor"

    [listed] = json.loads(perfline(db, "runs", "--json").stdout)
    assert listed["id"] == run["id"]
    assert listed["label"] == "demo" and listed["kernel_commit"] == "deadbeef"

    shown = json.loads(perfline(db, "show", str(run["id"]), "--json").stdout)
    assert [s["value"] for s in shown["samples"] if s["source"] == "benchmark"] == [42.0] * 3
    assert shown["fingerprint"]["kernel_release"] == os.uname().release

    text = perfline(db, "show", str(run["id"])).stdout
    assert "command.value" in text and "fingerprint" in text


def test_failing_benchmark_marks_run_failed_with_stderr_tail(tmp_path: Path) -> None:
    db = tmp_path / "perfline.db"
    proc = perfline(
        db, "run", "command", "-p", "cmd=echo lost disk >&2; exit 3", "--repeat", "2",
        "--warmup", "0", "--no-monitors", "--json", check=False,
    )
    assert proc.returncode == 1
    [run] = json.loads(proc.stdout)
    assert run["status"] == "failed"
    assert "status 3" in run["error"]
    assert "lost disk" in run["output_tail"]


def test_unknown_benchmark_suggests_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "perfline.db"
    proc = perfline(db, "run", "sched-pipee", check=False)
    assert proc.returncode == 2
    assert "sched-pipe" in proc.stderr
    assert not db.exists()


def test_malformed_job_reports_file_line_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "perfline.db"
    job = tmp_path / "bad.yaml"
    job.write_text("benchmark: sched-pipe\nrepaet: 3\n")
    proc = perfline(db, "run", str(job), check=False)
    assert proc.returncode == 2
    assert f"{job}:2:" in proc.stderr
    assert "repeat" in proc.stderr
    assert not db.exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_terminated_run_is_interrupted_and_keeps_samples(tmp_path: Path, sig: int) -> None:
    db = tmp_path / "perfline.db"
    proc = start(db, "run", "command", "-p", "cmd=sleep 0.2; echo 1", "--repeat", "500",
                 "--warmup", "0", "--no-monitors")
    wait_for_samples(db, 2, proc)
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    [run] = json.loads(perfline(db, "runs", "--json").stdout)
    assert run["status"] == "interrupted"
    assert run["repetitions"] >= 2


def test_sigkilled_run_keeps_finished_samples(tmp_path: Path) -> None:
    db = tmp_path / "perfline.db"
    proc = start(db, "run", "command", "-p", "cmd=sleep 0.2; echo 7", "--repeat", "500",
                 "--warmup", "0", "--no-monitors")
    wait_for_samples(db, 3, proc)
    proc.kill()
    proc.communicate(timeout=60)
    kept = stored_samples(db)
    assert kept >= 3
    # The next command notices the dead process and says so.
    listing = perfline(db, "runs", "--json")
    [run] = json.loads(listing.stdout)
    assert run["status"] == "interrupted"
    assert run["repetitions"] == kept
    assert "interrupted" in listing.stderr


def test_job_matrix_runs_every_case(tmp_path: Path) -> None:
    db = tmp_path / "perfline.db"
    job = tmp_path / "matrix.yaml"
    job.write_text(
        "benchmark: sched-pipe\n"
        "params:\n"
        "  loops: [2000, 4000]\n"
        "  threads: [true, false]\n"
        "repeat: 2\n"
        "warmup: 0\n"
        "monitors: [proc-stat]\n"
    )
    runs = json.loads(perfline(db, "run", str(job), "--json").stdout)
    assert len(runs) == 4
    assert len({r["case"] for r in runs}) == 4
    assert all(r["status"] == "completed" and r["repetitions"] == 2 for r in runs)


# blk,nop rather than function,nop: kernels under lockdown refuse the function tracer,
# and ftrace-switch's own tests cover that refusal.
TINY = {
    "ftrace-switch": ["iterations=3", "tracers=blk,nop"],
    "ftrace-events": ["iterations=3"],
    "rcu-gp": ["iterations=3"],
    "sched-pipe": ["loops=2000"],
    "hackbench": ["groups=1", "loops=20"],
    "tbench": ["clients=1", "duration=2"],
    "cpu-latency": ["duration_ms=100"],
    "migration-cost": ["size=262144", "repeat=3"],
    "cyclictest": ["duration=1"],
    "pgbench": ["scale=1", "duration=2", "clients=1"],
}


@pytest.mark.parametrize("benchmark", sorted(TINY))
def test_every_benchmark_runs_and_stores_samples(tmp_path: Path, benchmark: str) -> None:
    db = tmp_path / "perfline.db"
    params = [arg for value in TINY[benchmark] for arg in ("-p", value)]
    [run] = json.loads(
        perfline(db, "run", benchmark, *params, "--repeat", "2", "--warmup", "0", "--json").stdout
    )
    assert run["status"] == "completed", run["error"]
    assert run["repetitions"] == 2
    results = [m for m, s in run["summary"].items() if s["source"] == "benchmark"]
    assert results and all(m.startswith(f"{benchmark}.") for m in results)
    assert all(run["summary"][m]["n"] == 2 and run["summary"][m]["mean"] > 0 for m in results)
    monitors = {m.split(".")[0] for m, s in run["summary"].items() if s["source"] == "monitor"}
    assert {"proc-stat", "vmstat"} <= monitors
