"""`make demo`'s history tracked again and again, with real timing: is the step found
and narrowed to its commit every time?

    .venv/bin/python bench/track_demo_repeat.py [--times 30] [--jobs 1]

Each time: a fresh history from examples/bisect/make-repo.sh (64 commits, commit 41 does
8% more work), examples/track/demo.yaml, one `perfline track run --once` on its own
SQLite store, as examples/track/demo.sh runs it. bench.c times itself (BENCH_NOISE and
the other settings of tests/noise.py are removed from the environment): the noise is
this machine's of the moment. Printed per time: the records opened (with how they
ended), the culprit named, the runs spent, the learned noise and the minutes taken;
then how many times of all the step was found and narrowed to commit 41, against the
target of issue 27 (all of them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from perfline.system.measuring import LOCK_ENV

ROOT = Path(__file__).resolve().parents[1]
MAKE_REPO = ROOT / "examples" / "bisect" / "make-repo.sh"
TRACKER = ROOT / "examples" / "track" / "demo.yaml"
CULPRIT = 41
# bench.c's settings that replace its timing by drawn values (tests only).
SIMULATED = ("BENCH_NOISE", "BENCH_OFFSET", "BENCH_FAIL", "BENCH_SEED", "BENCH_PERIOD")


@dataclass(frozen=True)
class Tracked:
    found: bool  # a regression record whose range holds commit 41
    narrowed: bool  # bisected to commit 41
    records: str
    runs: int
    noise: str
    minutes: float
    error: str = ""


def once(index: int, keep: Path | None) -> Tracked:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="perfline-demo-repeat.") as scratch:
        where = Path(scratch)
        subprocess.run([str(MAKE_REPO), str(where / "src")], check=True)
        shutil.copy(TRACKER, where / "tracker.yaml")
        env = {k: v for k, v in os.environ.items() if k not in SIMULATED}
        env.update(PERFLINE_DB=str(where / "db"), PERFLINE_CACHE_DIR=str(where / "cache"))
        # --jobs N: N trackers measuring at once on purpose, each with its own measuring
        # lock (system/measuring.py), as if on a machine of its own.
        env[LOCK_ENV] = str(where / "measure.lock")

        def perfline(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "perfline", *args], capture_output=True, text=True,
                                  cwd=where, env=env, check=False)

        tracked = perfline("track", "run", "tracker.yaml", "--once")
        if keep is not None:
            (keep / f"track-{index}.log").write_text(tracked.stdout + tracked.stderr)
        commits = subprocess.run(["git", "-C", str(where / "src"), "rev-list", "--reverse", "main"],
                                 capture_output=True, text=True, check=True).stdout.split()
        records = json.loads(perfline("regressions", "--json").stdout or "[]")
        status = json.loads(perfline("track", "status", "demo", "--json").stdout or "[{}]")[0]
        with sqlite3.connect(where / "db") as db:
            [(runs,)] = db.execute("SELECT count(*) FROM runs").fetchall()
    position = {sha: i for i, sha in enumerate(commits)}
    found = narrowed = False
    said = []
    for r in records:
        good, bad = position.get(r["good"] or "", -1), position.get(r["bad"] or "", -1)
        culprit = position.get(r["culprit"] or "")
        said.append(f"{r['kind']} {good}..{bad} {r['status']}" + (f" -> {culprit}" if culprit is not None else ""))
        if r["kind"] == "regression" and good < CULPRIT <= bad:
            found = True
            narrowed |= r["status"] == "bisected" and culprit == CULPRIT
    noise = ", ".join(f"{n['noise_pct']:.2f}% ({n['commits']})" for n in status.get("noise", []))
    error = tracked.stderr.strip().splitlines()[-1] if tracked.returncode else ""
    return Tracked(found, narrowed, "; ".join(said) or "none", runs, noise or "-", (time.monotonic() - started) / 60,
                   error)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--times", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=1, help="trackers at once (each measures against itself)")
    parser.add_argument("--logs", type=Path, help="keep each pass's output in this directory")
    args = parser.parse_args(argv)
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    print(f"make demo's history (commit {CULPRIT}: 8% more work), tracked {args.times} times with real timing, "
          f"{args.jobs} at a time; load average at the start: {os.getloadavg()[0]:.1f}")
    results = []
    with ThreadPoolExecutor(args.jobs) as pool:
        # Printed as each ends, so that a bench cut short still shows what it measured.
        futures = [pool.submit(once, i, args.logs) for i in range(args.times)]
        for i, future in enumerate(as_completed(futures), 1):
            r = future.result()
            results.append(r)
            print(f"{i:3d}: found {'yes' if r.found else 'NO '} narrowed to {CULPRIT} {'yes' if r.narrowed else 'NO '} "
                  f"runs {r.runs:4d} {r.minutes:5.1f} min  learned noise {r.noise}  records: {r.records}"
                  + (f"  error: {r.error}" if r.error else ""))
    found, narrowed = sum(r.found for r in results), sum(r.narrowed for r in results)
    print(f"found {found} of {len(results)}, narrowed to commit {CULPRIT} {narrowed} of {len(results)} "
          f"(target: {len(results)} of {len(results)}); load average at the end: {os.getloadavg()[0]:.1f}")
    return 0 if narrowed == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
