"""The tracker under faults: real CLI passes over generated C histories, killed at random.

    .venv/bin/python bench/track_chaos.py [--histories 100] [--seed 1] [--jobs 1] [--commits 40]
        [--first K] [--results FILE]      # histories K.. only; each outcome appended to FILE
    .venv/bin/python bench/track_chaos.py --table FILE...   # the table of the outcomes in them

Each history is a small C project (examples/bisect/bench.c and its Makefile) of
`--commits` commits, tracked with `perfline track run --once` (every 8th commit and the
head, `narrow: true`, SQLite, real `make` builds in worktrees):

- one step of 3-10% (the program does more work) at a commit drawn uniformly;
- bench.c's noise set per history (BENCH_NOISE 1-3% per sample), a machine offset of
  0.5% that changes every 3 s (run-to-run variation), and a failure (exit 3) once in 50
  runs of the program (BENCH_FAIL=50);
- one commit in 10 (drawn at random, never the first or the head) does not compile;
- in every other history, the first pass is SIGKILLed (the whole process group, builds
  included) at a moment drawn uniformly over the pass's expected wall time (the median of
  the passes not killed so far), and `track run` is run again, as cron would; and again
  (at most 4 passes) while a record is still `new` or `confirmed` (an inconclusive
  confirmation is tried again on the next pass).

Then the store is read: the record of the step and its answer. A history counts as
- exact: the record's culprit is the step's commit;
- range: an honest range (status bisected, `culprits` listed) that contains it;
- WRONG: any record whose culprit, or range, leaves the step's commit out;
- missed: no record was narrowed (not found, not confirmed, or not bisected);
and, per history, whether a tested commit has more than one completed run (a kill must
not make a commit be tested twice) and how many runs the narrowing took (confirmation
plus bisection, every run a separate process). Printed split into killed and not killed.
Targets (issue 31): wrong = 0 of >= 100 histories; of those narrowed, exact or honest
range >= 99%; the killed half no worse than the other.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from perfline.system.measuring import LOCK_ENV

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "bisect"
WORK = 2_000_000
GIT = ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.org"]
TRACKER = """\
name: chaos
repo: ./src
branch: main
select:
  every: 8
since: {since}
build: make -s
jobs:
  - benchmark: command
    params:
      cmd: $PERFLINE_TREE/bench
      metric: seconds
      unit: s
      direction: lower
    repeat: 5
    monitors: []
narrow: true
budget:
  runs_per_day: 1000
"""


@dataclass(frozen=True)
class History:
    index: int
    culprit: int
    step: float
    noise: float
    broken: frozenset[int]
    killed: bool


@dataclass(frozen=True)
class Outcome:
    history: History
    verdict: str  # exact, range, WRONG, missed
    detail: str
    narrowing_runs: int
    twice_tested: int  # tested commits with more than one completed run
    seconds: float
    kill_at: float | None


def make_history(where: Path, commits: int, history: History) -> list[str]:
    src = where / "src"
    subprocess.run(["git", "init", "-q", "-b", "main", str(src)], check=True)
    shutil.copy(EXAMPLE / "bench.c", src)
    shutil.copy(EXAMPLE / "Makefile", src)
    for i in range(commits):
        work = round(WORK * (1 + history.step)) if i >= history.culprit else WORK
        (src / "work.h").write_text("#define WORK (\n" if i in history.broken else f"#define WORK {work}UL\n")
        (src / "NOTES").write_text(f"change {i}\n")
        subprocess.run([*GIT, "-C", str(src), "add", "."], check=True)
        subprocess.run([*GIT, "-C", str(src), "commit", "-q", "-m", f"change {i}"], check=True)
    out = subprocess.run(["git", "-C", str(src), "rev-list", "--reverse", "main"], capture_output=True, text=True,
                         check=True).stdout
    return out.split()


def environment(where: Path, history: History) -> dict[str, str]:
    return {**os.environ, "PERFLINE_DB": str(where / "db"), "PERFLINE_CACHE_DIR": str(where / "cache"),
            "BENCH_NOISE": f"{history.noise:.4f}", "BENCH_OFFSET": "0.005", "BENCH_PERIOD": "3",
            "BENCH_FAIL": "50",
            # Each history is a machine of its own (--jobs 2 runs two at once, the load
            # being part of the noise): its own measuring lock (system/measuring.py).
            LOCK_ENV: str(where / "measure.lock")}


# Passes at most per history: the first (maybe killed) and the next days' runs.
PASSES = 4
PASS = [sys.executable, "-m", "perfline", "track", "run", "tracker.yaml", "--once"]


def run_history(history: History, commits: int, expected_s: float, keep: Path | None) -> Outcome:
    where = Path(tempfile.mkdtemp(prefix=f"perfline-chaos-{history.index}-", dir=keep))
    try:
        shas = make_history(where, commits, history)
        (where / "tracker.yaml").write_text(TRACKER.format(since=shas[0]))
        env = environment(where, history)
        started = time.monotonic()
        kill_at = None
        if history.killed:
            kill_at = random.Random(history.index).uniform(0, expected_s)
            with open(where / "killed.log", "w") as log:
                proc = subprocess.Popen(PASS, cwd=where, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
                try:
                    proc.wait(timeout=kill_at)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        for attempt in range(PASSES):  # cron runs it again, day after day
            done = subprocess.run(PASS, cwd=where, env=env, capture_output=True, text=True, timeout=3600,
                                  check=False)
            (where / f"pass-{attempt}.log").write_text(done.stdout + done.stderr)
            if done.returncode != 0:
                raise RuntimeError(f"history {history.index}: track run exited {done.returncode}:\n"
                                   f"{done.stderr[-2000:]}")
            if not unfinished(where):
                break
        seconds = time.monotonic() - started
        return judge(where, shas, history, seconds, kill_at)
    finally:
        if keep is None:
            shutil.rmtree(where, ignore_errors=True)


def unfinished(where: Path) -> bool:
    """Whether a record is still to be narrowed (a confirmation that was inconclusive
    stays `new` and is tried again on the next pass, as the next day's cron would)."""
    with sqlite3.connect(where / "db") as db:
        return bool(db.execute("SELECT count(*) FROM regressions WHERE status IN ('new', 'confirmed')").fetchone()[0])


def judge(where: Path, shas: list[str], history: History, seconds: float, kill_at: float | None) -> Outcome:
    culprit = shas[history.culprit]
    listed = json.loads(subprocess.run([sys.executable, "-m", "perfline", "--db", str(where / "db"), "regressions",
                                        "--json"], capture_output=True, text=True, check=True).stdout)
    named = [r for r in listed if r["culprit"] or r["culprits"]]
    wrong = [r for r in named if (r["culprit"] or "") != culprit and culprit not in {c["sha"] for c in r["culprits"]}]
    right = [r for r in named if r not in wrong]
    with sqlite3.connect(where / "db") as db:
        tests = Counter(commit for commit, settings in db.execute(
            "SELECT kernel_commit, settings FROM runs WHERE label = 'chaos' AND status = 'completed'")
            if "interleaved" not in json.loads(settings))
        narrowing = db.execute("SELECT count(*) FROM runs WHERE label LIKE 'bisect-%' OR (label = 'chaos' AND "
                               "settings LIKE '%interleaved%')").fetchone()[0]
    if wrong:
        r = wrong[0]

        def at(sha: str | None) -> str:  # a commit as its index in the history, else its sha
            return str(shas.index(sha)) if sha in shas else str(sha)[:12]

        shown = at(r["culprit"]) if r["culprit"] else ",".join(at(c["sha"]) for c in r["culprits"])
        verdict, detail = "WRONG", (f"named {shown} ({r['status']} {r['kind']} of record {r['id']}, range "
                                    f"{at(r['good'])}..{at(r['bad'])}, {r['change_pct']:+.1f}%), real "
                                    f"{history.culprit}")
    elif right:
        exact = any(r["culprit"] == culprit for r in right)
        verdict = "exact" if exact else "range"
        detail = "" if exact else ",".join(str(shas.index(c["sha"])) for c in right[0]["culprits"])
    else:
        verdict = "missed"
        detail = ",".join(f"{r['status']}" for r in listed) or "no record"
    return Outcome(history, verdict, detail, narrowing, sum(n > 1 for n in tests.values()), seconds, kill_at)


def draw(index: int, commits: int, seed: int) -> History:
    rng = random.Random(seed * 100_003 + index)
    culprit = rng.randrange(1, commits)
    broken = frozenset(i for i in range(1, commits - 1) if rng.random() < 0.1)
    return History(index, culprit, rng.uniform(0.03, 0.10), rng.uniform(0.01, 0.03), broken, killed=index % 2 == 1)


def table(outcomes: list[Outcome]) -> str:
    lines = [(f"{'passes':<11} {'histories':>9} {'exact':>6} {'range':>6} {'WRONG':>6} {'missed':>7} "
             f"{'exact|range of narrowed':>24} {'runs/regression':>16} {'tested twice':>13} {'s/history':>10}")]
    for name, chosen in (("not killed", [o for o in outcomes if not o.history.killed]),
                         ("killed", [o for o in outcomes if o.history.killed]), ("all", outcomes)):
        if not chosen:
            continue
        count = Counter(o.verdict for o in chosen)
        narrowed = count["exact"] + count["range"] + count["WRONG"]
        honest = f"{(count['exact'] + count['range']) / narrowed:.1%}" if narrowed else "-"
        runs = [o.narrowing_runs for o in chosen if o.verdict in ("exact", "range", "WRONG")]
        lines.append(f"{name:<11} {len(chosen):>9} {count['exact']:>6} {count['range']:>6} {count['WRONG']:>6} "
                     f"{count['missed']:>7} {honest:>24} {statistics.mean(runs) if runs else 0:>16.1f} "
                     f"{sum(o.twice_tested for o in chosen):>13} {statistics.mean(o.seconds for o in chosen):>10.1f}")
    return "\n".join(lines)


def outcome_from_json(line: str) -> Outcome:
    fields = json.loads(line)
    history = fields.pop("history")
    history["broken"] = frozenset(history["broken"])
    return Outcome(History(**history), **fields)


def outcome_to_json(outcome: Outcome) -> str:
    fields = dataclasses.asdict(outcome)
    fields["history"]["broken"] = sorted(outcome.history.broken)
    return json.dumps(fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--histories", type=int, default=100)
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="keep each history's directory under this one")
    parser.add_argument("--first", type=int, default=0, help="start at this history (a run in parts)")
    parser.add_argument("--results", type=Path, help="append each outcome to this file (JSON lines)")
    parser.add_argument("--table", type=Path, nargs="+", help="only print the table of these results files")
    args = parser.parse_args()
    if args.table:
        loaded = [outcome_from_json(line) for path in args.table for line in path.read_text().splitlines() if line]
        by_index = {o.history.index: o for o in loaded}  # a history run twice counts once
        print(table(list(by_index.values())))
        print(f"\n{len(by_index)} histories; target: WRONG = 0, exact|range of narrowed >= 99%, "
              "killed no worse than not killed")
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    histories = [draw(i, args.commits, args.seed) for i in range(args.first, args.histories)]
    outcomes: list[Outcome] = []
    started = time.monotonic()

    def expected() -> float:
        unkilled = [o.seconds for o in outcomes if not o.history.killed]
        return statistics.median(unkilled) if unkilled else 60.0

    with ThreadPoolExecutor(args.jobs) as pool:
        # Not-killed histories first in each pair, so the kill moment has an estimate.
        for outcome in pool.map(lambda h: run_history(h, args.commits, expected(), args.keep), histories):
            outcomes.append(outcome)
            h = outcome.history
            kill = f"killed at {outcome.kill_at:5.1f} s" if outcome.kill_at is not None else "not killed"
            print(f"history {h.index:>3}: step {h.step:+.1%} at {h.culprit:>2}, noise {h.noise:.1%}, broken "
                  f"{sorted(h.broken)}, {kill}: {outcome.verdict} {outcome.detail} ({outcome.narrowing_runs} "
                  f"narrowing runs, {outcome.seconds:.0f} s)", flush=True)
            if args.results:
                with args.results.open("a") as results:
                    results.write(outcome_to_json(outcome) + "\n")
    print()
    print(table(outcomes))
    print(f"\n{len(outcomes)} histories of {args.commits} commits in {time.monotonic() - started:.0f} s; "
          "target: WRONG = 0, exact|range of narrowed >= 99%, killed no worse than not killed")


if __name__ == "__main__":
    main()
