"""What the monitors cost the benchmark they watch: interleaved A/B, no monitors vs some.

    .venv/bin/python bench/monitor_overhead.py [--pairs 20] [--quick] [--benchmark NAME] [--default-only]

For sched-pipe (pinned to CPU 0) and tbench, `perfline ab`'s own loop (runner.
execute_interleaved, ABBA pairs) measures the benchmark without monitors (A) against the
same benchmark with the default monitors (B), then with every monitor that runs on this
machine (B'), and prints the benchmark metric's change with its 95% CI and verdict
(compare's rule); `--each` gives sched-pipe one row per monitor. Target: the default monitors cost < 1%; a monitor that costs more is
kept off by default and `perfline list` says so.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from perfline.analysis.comparison import Side, compare_sides
from perfline.monitors import DEFAULT_MONITORS, MONITORS, MonitorUnavailable
from perfline.records.job import Case
from perfline.records.metric import Measurement
from perfline.runner import RunContext, execute_interleaved
from perfline.runner.loop import RunOutcome
from perfline.store import Store
from perfline.targets import local

TARGET_PCT = 1.0


class Quiet:
    def run_started(self, run_id: int, case: Case) -> None: ...

    def step_started(self, run_id: int, repetition: int | None) -> None: ...

    def warning(self, message: str) -> None:
        print(f"  warning: {message}", file=sys.stderr)

    def step_done(self, run_id: int, repetition: int | None, values: list[Measurement]) -> None:
        print(".", end="", file=sys.stderr, flush=True)

    def run_finished(self, outcome: RunOutcome) -> None: ...


def runnable_monitors() -> tuple[str, ...]:
    """Every monitor this machine supports, profiling aside (it is a different cost: a
    sampling profiler, on request only)."""
    found = []
    for name in MONITORS.names():
        if name in ("perf-profile", "pace"):
            continue
        try:
            MONITORS.get(name)().check()
        except MonitorUnavailable:
            continue
        found.append(name)
    return tuple(found)


def overhead(store: Store, benchmark: str, params: dict[str, object], metric: str, monitors: tuple[str, ...],
             pairs: int, tunables: dict[str, dict[str, object]]) -> str:
    def case(chosen: tuple[str, ...]) -> Case:
        return Case(benchmark, benchmark, dict(params), tunables, pairs, 1, chosen, "local")  # type: ignore[arg-type]

    ctx = RunContext(store=store, fingerprint=local.fingerprint, observer=Quiet(), label="monitor-overhead")
    outcomes = execute_interleaved(case(()), case(monitors), pairs, ctx)
    print(file=sys.stderr)
    sides = [Side(name, [store.get_run(o.run_id)]) for name, o in zip(("none", "monitors"), outcomes, strict=True)]
    comparison = compare_sides(sides, store, paired=True)
    [row] = [r for r in comparison.rows if r.metric.name == metric]
    c = row.others[0]
    assert c is not None
    low, high = c.ci_pct
    # Judged by the interval: met only when the whole CI is within the target.
    if -TARGET_PCT < low and high < TARGET_PCT:
        verdict = "met"
    elif low > TARGET_PCT or high < -TARGET_PCT:
        verdict = "missed"
    else:
        verdict = "undecided at this many pairs"
    return (f"{c.change_pct:+6.2f}% [{c.ci_pct[0]:+.2f}, {c.ci_pct[1]:+.2f}]  {c.verdict:<12} "
            f"target |change| < {TARGET_PCT:g}%: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="4 pairs, sched-pipe only: a smoke run")
    parser.add_argument("--benchmark", choices=("sched-pipe", "tbench"),
                        help="only this benchmark (to narrow one row's interval with more pairs)")
    parser.add_argument("--default-only", action="store_true",
                        help="only the default monitors against none")
    parser.add_argument("--each", action="store_true",
                        help="sched-pipe only, one row per monitor: which one costs what")
    args = parser.parse_args()
    pairs = 4 if args.quick else args.pairs
    everything = runnable_monitors()
    benchmarks = [("sched-pipe", {"loops": 20000}, "sched-pipe.usecs_per_op", {"pin": {"pin": "0"}})]
    if not args.quick:
        benchmarks.append(("tbench", {"clients": 2, "duration": 3}, "tbench.throughput", {}))
    if args.benchmark:
        benchmarks = [b for b in benchmarks if b[0] == args.benchmark]
    sets = [("default", DEFAULT_MONITORS)]
    if not args.default_only:
        sets.append(("every monitor", everything))
    with tempfile.TemporaryDirectory() as scratch:
        store = Store.open(f"sqlite:///{Path(scratch) / 'overhead.db'}")
        print(f"{pairs} interleaved pairs each; no monitors vs the monitors named")
        if args.each:
            benchmark, params, metric, tunables = benchmarks[0]
            for name in everything:
                line = overhead(store, benchmark, params, metric, (name,), pairs, tunables)
                print(f"  {benchmark:<11} {name:<14} {line}")
            return
        for benchmark, params, metric, tunables in benchmarks:
            for label, monitors in sets:
                line = overhead(store, benchmark, params, metric, monitors, pairs, tunables)
                print(f"  {benchmark:<11} {label:<14} {line}")
        print(f"every monitor here: {', '.join(everything)}")


if __name__ == "__main__":
    main()
