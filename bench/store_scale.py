"""The store at scale, against issue 17's targets.

    .venv/bin/python bench/store_scale.py [--sizes 100000,1000000] [--postgres]

For each size: runs of 20 metrics x 5 repetitions (1,000,000 samples = 10,000 runs) in
5 cases, each case a series of runs in time order, the first half of each case labelled
A and the second B. They are imported through the same call `perfline import` makes
(store.add_imported: one transaction), into SQLite and, with --postgres, into a private
PostgreSQL server on loopback. Then, best of 3 where it is cheap:

- import time (target at 1M samples: SQLite < 60 s, PostgreSQL < 120 s);
- one series (a metric and a case, every run a point) as the dashboard and `history`
  read it (target < 100 ms at 2,000 points);
- `perfline detect --json` over every series (target < 60 s);
- `perfline compare --label A --label B --json` (target < 2 s at 2,000 runs a side).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from perfline import __version__
from perfline.records.metric import Direction, Metric
from perfline.store import Store
from perfline.store.imports import NewRun

METRICS = 20
REPS = 5
CASES = 5


def runs_for(samples: int) -> list[NewRun]:
    rng = np.random.default_rng(7)
    count = samples // (METRICS * REPS)
    per_case = count // CASES
    metrics = [Metric(f"scale.m{i}", "s", Direction.LOWER) for i in range(METRICS)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    now = datetime.now(UTC)
    runs = []
    for case in range(CASES):
        for i in range(per_case):
            when = start + timedelta(minutes=i)
            level = 1.0 if i < per_case * 0.7 else 1.04  # a 4% step at 70% of the series
            values = level * rng.lognormal(0, 0.02, (METRICS, REPS))
            columns = {
                "job": "scale", "benchmark": "scale", "case_key": f"case={case}", "params": {"case": case},
                "tunables": {}, "monitors": [], "target": "imported", "label": "A" if i < per_case // 2 else "B",
                "kernel_commit": None, "hostname": "scale", "machine_id": "scale0", "kernel_release": "",
                "fingerprint": {"hostname": "scale", "machine_id": "scale0", "loadavg": [0, 0, 0]},
                "config_hash": None, "settings": {"imported": {"format": "bench"}}, "status": "completed",
                "error": None, "output_tail": None, "repeat": REPS, "warmup": 0, "started_at": when,
                "finished_at": when, "pid": 0, "boot_id": "bench", "perfline_version": __version__,
            }
            runs.append(NewRun(columns, [(r, metrics[m], "benchmark", float(values[m, r]), now)
                                         for m in range(METRICS) for r in range(REPS)]))
    return runs


def best(fn, times: int = 3) -> float:  # type: ignore[no-untyped-def]
    out = float("inf")
    for _ in range(times):
        started = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - started)
    return out


def cli(db: str, *args: str) -> float:
    return cli_times(db, *args)[0]


def cli_times(db: str, *args: str) -> tuple[float, float]:
    """Wall time and CPU time (user + sys) of one command: on a shared machine the CPU
    time is the steadier figure, as other loads stretch the wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "perfline", "--db", db, *args], check=True, capture_output=True,
                   timeout=3600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def cli_rows(db: str, what: str, target: float | None, *args: str) -> None:
    """The best wall time of 3, and that run's CPU time."""
    wall, cpu = min(cli_times(db, *args) for _ in range(3))
    row(what, wall, target, "s")
    row("    its CPU time (user + sys)", cpu, None, "s")


def row(what: str, value: float, target: float | None, unit: str) -> None:
    verdict = "" if target is None else f"target < {target:g} {unit}  {'ok' if value < target else 'MISSED'}"
    print(f"  {what:<52} {value:9.2f} {unit:<3} {verdict}")


def measure(url: str, samples: int) -> None:
    runs = runs_for(samples)
    store = Store.open(url)
    started = time.perf_counter()
    store.add_imported(runs)
    imported = time.perf_counter() - started
    per_case = len(runs) // CASES
    target = 60.0 if url.startswith("sqlite") else 120.0
    row(f"import {samples:,} samples ({len(runs):,} runs)", imported, target if samples >= 1_000_000 else None, "s")
    row(f"one series ({per_case:,} points), dashboard rows",
        1000 * best(lambda: store.series_rows("scale.m0", "case=0")), 100, "ms")
    row(f"one series ({per_case:,} points), history's values",
        1000 * best(lambda: store.metric_values(metric="scale.m0", case_key="case=0")), 100, "ms")
    from perfline.analysis.comparison import compare_sides, sides_by_label

    def compare() -> None:
        for sides in sides_by_label(store, ["A", "B"]):
            compare_sides(sides, store)

    row(f"compare A vs B, in-process ({per_case // 2 * CASES:,} runs a side)", best(compare, 2), 2, "s")
    cli_rows(url, "  the same, `perfline compare --label A --label B --json`", 2,
             "compare", "--label", "A", "--label", "B", "--json")
    cli_rows(url, "  of which start-up (`perfline version`: Python, imports)", None, "version")
    row(f"detect over every series ({METRICS * CASES} series)", cli(url, "detect", "--json"), 60, "s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="perfline-scale-") as scratch:
        for size in (int(s) for s in args.sizes.split(",")):
            db = Path(scratch) / f"scale-{size}.db"
            print(f"SQLite, {size:,} samples:")
            measure(f"sqlite:///{db}", size)
            print(f"  (store file {db.stat().st_size / 2**20:.0f} MiB)")
            if args.postgres:
                from perfline.system.pgserver import PrivateServer

                with PrivateServer(Path(scratch) / f"pg-{size}") as server:
                    print(f"PostgreSQL, {size:,} samples:")
                    measure(server.create_database("scale"), size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
