"""Instruction counts against wall time on the example project (issue 28).

    .venv/bin/python bench/counted_track.py [--cv-runs 20] [--skip cv,counts,wall,slowdown]

Four parts, each printed against its target:

cv        the example program (examples/bisect/bench.c) run --cv-runs times under
          `count: instructions`: the CV of its count (target < 0.05%) and the counter
          this machine used (perf where the CPU counts, else Valgrind's cachegrind);
counts    a 64-commit history of examples/bisect/make-repo.sh whose commit 41 makes the
          program do 0.5% more work (CULPRIT_WORK=2020000UL: its two loops together),
          tracked with examples/track/counts.yaml (every 8th commit of the last 40, one
          run a commit): the runs it took to test, confirm and bisect, its seconds, and
          the culprit (target: exactly commit 41, one run a tested commit, <= 15 runs in
          the bisection);
wall      the same history tracked on the program's wall time (`timing: true`, 5 runs a
          commit, the timed metric's minimum): what it records (expected: nothing, the
          step is below its noise), the same columns;
slowdown  Valgrind's slowdown: the example, and xz compressing 512 KiB (a real program),
          median of --slowdown-runs (3) runs natively and under each counter, in CPU time (user + system:
          the wall time of a loaded machine measures the load too).

Every perfline runs with this tree's sources, one job at a time; the machine's load at
the start is printed, as the wall times depend on it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAKE_REPO = ROOT / "examples" / "bisect" / "make-repo.sh"
COUNTS_TRACKER = ROOT / "examples" / "track" / "counts.yaml"
CULPRIT, CULPRIT_WORK = 41, "2020000UL"
WALL_TRACKER = """name: wall
repo: ./src
branch: main
select:
  every: 8
since: HEAD~40
build: make -s
jobs:
  - benchmark: command
    params:
      cmd: $PERFLINE_TREE/bench
      timing: true
    repeat: 5
    monitors: []
narrow: true
"""


def perfline(env: dict[str, str], *args: str, timeout: float = 7200) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfline", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def environment(scratch: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PERFLINE_DB": str(scratch / "db"),
            "PERFLINE_STATE_DIR": str(scratch / "state"), "PERFLINE_CACHE_DIR": str(scratch / "cache")}


def history(scratch: Path, commits: int = 64) -> Path:
    src = scratch / "src"
    subprocess.run([str(MAKE_REPO), str(src), str(commits), str(CULPRIT)], check=True,
                   env={**os.environ, "CULPRIT_WORK": CULPRIT_WORK})
    return src


def built_example(scratch: Path) -> Path:
    src = history(scratch, 1)
    subprocess.run(["make", "-s"], cwd=src, check=True)
    return src / "bench"


def cv_part(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="perfline-counted-cv-") as tmp:
        scratch = Path(tmp)
        program = built_example(scratch)
        env = environment(scratch)
        proc = perfline(env, "run", "command", "-p", f"cmd={program}", "-p", "count=instructions",
                        "--repeat", str(runs), "--warmup", "0", "--no-monitors", "--json")
        if proc.returncode != 0:
            sys.exit(f"cv: perfline run failed: {proc.stderr[-2000:]}")
        [run] = json.loads(proc.stdout)
        [(metric, values)] = _samples(run).items()
        mean = statistics.fmean(values)
        cv = 100 * statistics.stdev(values) / mean
        print(f"cv: {len(values)} runs of the example under count: instructions: {metric} = {mean:,.0f} "
              f"(min {min(values):,.0f}, max {max(values):,.0f}), CV {cv:.5f}% (target < 0.05%: "
              f"{'met' if cv < 0.05 else 'MISSED'}); counter: {run['settings'].get('counter')}")


def _samples(run: dict) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for sample in run["samples"]:
        found.setdefault(sample["metric"], []).append(sample["value"])
    return found


def track_part(name: str, tracker_text: str) -> dict[str, object]:
    """One tracker over a fresh copy of the history: its figures."""
    with tempfile.TemporaryDirectory(prefix=f"perfline-counted-{name}-") as tmp:
        scratch = Path(tmp)
        history(scratch)
        (scratch / "tracker.yaml").write_text(tracker_text)
        env = environment(scratch)
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "perfline", "track", "run", "tracker.yaml", "--once"],
                              cwd=scratch, env=env, capture_output=True, text=True,
                              timeout=7200, check=False)
        seconds = time.monotonic() - started
        if proc.returncode != 0:
            sys.exit(f"{name}: track run failed ({proc.returncode}): {proc.stderr[-3000:]}")
        listed = json.loads(perfline(env, "runs", "--limit", "100000", "--json").stdout)
        # The list has no settings, which tell a confirmation's interleaved runs apart.
        runs = [json.loads(perfline(env, "show", str(r["id"]), "--json").stdout) for r in listed]
        regressions = json.loads(perfline(env, "regressions", "--json").stdout)
        bisection = perfline(env, "bisect", "status").stdout if regressions else ""
        probes = re.search(r"(\d+) runs of at most", bisection)
        tested = [r for r in runs if r["label"] == name and not r.get("settings", {}).get("interleaved")]
        confirming = [r for r in runs if r.get("settings", {}).get("interleaved")]
        return {
            "tracker": name,
            "tested commits": len({r["kernel_commit"] for r in tested}),
            "runs a commit": statistics.fmean(r["repetitions"] for r in tested) if tested else 0,
            "confirmation runs": sum(r["repetitions"] for r in confirming),
            "bisection runs": int(probes.group(1)) if probes else 0,
            "seconds": round(seconds),
            "recorded": "; ".join(f"{r['kind']} {r['metric']} {r['change_pct']:+.2f}% between {r['good'][:8]} and "
                                  f"{r['bad'][:8]} ({r['status']})" for r in regressions) or "nothing",
            "culprit": "; ".join(f"{r['culprit'][:12]} {r['culprit_subject']}" for r in regressions if r.get("culprit"))
                       or "-",
        }


def slowdown_part(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="perfline-counted-slow-") as tmp:
        scratch = Path(tmp)
        program = built_example(scratch)
        data = scratch / "input"
        rng = random.Random(28)
        words = [bytes(rng.choices(b"abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(5000)]
        data.write_bytes(b" ".join(rng.choice(words) for _ in range(100_000))[: 512 << 10])
        xz = shutil.which("xz")
        programs = [("example (bench.c)", [str(program)])]
        if xz:
            programs.append(("xz -6 -T1, 512 KiB of text", [xz, "-6", "-T1", "-c", str(data)]))
        counters = [("native", []),
                    ("cachegrind --cache-sim=no", ["valgrind", "--tool=cachegrind", "--cache-sim=no", "-q",
                                                   f"--cachegrind-out-file={scratch}/cg.%p"]),
                    ("cachegrind --cache-sim=yes", ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "-q",
                                                    f"--cachegrind-out-file={scratch}/cs.%p"]),
                    ("callgrind --instr-atstart=no", ["valgrind", "--tool=callgrind", "--instr-atstart=no", "-q",
                                                      f"--callgrind-out-file={scratch}/cl.%p"])]
        for label, argv in programs:
            times = {}
            for name, prefix in counters:
                seconds = []
                for _ in range(runs):
                    seconds.append(_cpu_seconds([*prefix, *argv]))
                times[name] = statistics.median(seconds)
            native = times["native"]
            print(f"slowdown, {label}: native {native:.3f} s CPU; "
                  + "; ".join(f"{name} {t:.2f} s ({t / native:.0f}x)" for name, t in times.items() if name != "native"))


def _cpu_seconds(argv: list[str]) -> float:
    """User + system CPU time of a command and its children: on a loaded machine its
    wall time measures the load as much as the program."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cv-runs", type=int, default=20)
    parser.add_argument("--slowdown-runs", type=int, default=3, help="runs of each program under each counter")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: cv, counts, wall, slowdown")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    print(f"load average at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if "cv" not in skip:
        cv_part(args.cv_runs)
    rows = []
    if "counts" not in skip:
        rows.append(track_part("counts", COUNTS_TRACKER.read_text()))
    if "wall" not in skip:
        rows.append(track_part("wall", WALL_TRACKER))
    for row in rows:
        print(" | ".join(f"{key}: {value}" for key, value in row.items()))
    for row in rows:
        if row["tracker"] == "counts":
            exact = str(row["culprit"]).endswith(f"change {CULPRIT} (more work)")
            print(f"counts: culprit exact: {'met' if exact else 'MISSED'}; one run a tested commit: "
                  f"{'met' if row['runs a commit'] == 1 else 'MISSED'}; bisection runs {row['bisection runs']} "
                  f"(target <= 15: {'met' if 0 < int(str(row['bisection runs'])) <= 15 else 'MISSED'})")
        else:
            found = str(row["culprit"]).endswith(f"change {CULPRIT} (more work)")
            print(f"wall: the 0.5% step's culprit {'found' if found else 'missed, as expected'}"
                  + ("" if row["recorded"] == "nothing" else " (what it recorded is in its row)"))
    if "slowdown" not in skip:
        slowdown_part(args.slowdown_runs)


if __name__ == "__main__":
    main()
