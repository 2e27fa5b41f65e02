"""A tracker's confirmation over attempts: started again each time, or continued.

    .venv/bin/python bench/confirm_attempts.py [--trials 4000] [--attempts 1,4,10] [--jobs 2]

A record's confirmation is an interleaved A/B of its two commits, looked at on a
group-sequential plan (stats.sequential: looks at 6, 9, 14, 20 pairs, alpha 1% over all
of them). An attempt can end before the plan does; here a run of the benchmark fails
once in 50 (`--fail`, as in bench/track_chaos.py), which ends the attempt where it is,
and the next pass makes another attempt, up to `--attempts` passes. Two rules:

  restart   each attempt is a new test from its first look, and an attempt cut short is
            judged at the pairs it had (the rule before analysis/sequential_confirmation.py);
  continue  each attempt goes on with the pairs of the ones before, only a look of the
            plan counted over all attempts judges (analysis/sequential_confirmation.py).

Rows: A/A records (no change: the share confirmed is the false-confirmation rate, target
at most 1%) and records of a real step (its size in per-sample noise widths: the share
confirmed is the power), with the mean pairs measured per record. The samples are
Gaussian with 2% noise; the judging is perfline's own (SequentialPlan.done and
stats.two_sample.compare, the 1% floor).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from perfline.records.metric import Direction, Metric
from perfline.stats.sequential import SequentialPlan
from perfline.stats.two_sample import compare

METRIC = Metric("seconds", "s", Direction.LOWER)
NOISE = 0.02
FLOOR_PCT = 1.0
MAX_PAIRS = 20
TARGET_PCT = 1.0
Judge = Callable[[list[float], list[float]], bool]


def _significant(plan: SequentialPlan, base: list[float], other: list[float]) -> bool:
    pairs = min(len(base), len(other))
    found = compare(base[:pairs], other[:pairs], METRIC, alpha=plan.alpha_at(pairs),
                    confidence=plan.confidence_at(pairs), floor_pct=FLOOR_PCT, paired=True)
    return found.significant and found.change_pct > 0


def trial(args: tuple[int, str, int, float, float]) -> tuple[bool, int]:
    """One record: confirmed?, and the pairs measured over its attempts."""
    seed, rule, attempts, step, fail = args
    rng = np.random.default_rng(seed)
    plan = SequentialPlan.up_to(MAX_PAIRS, 0.01)
    base: list[float] = []
    other: list[float] = []
    measured = 0

    def run(level: float) -> float | None:
        return None if rng.random() < fail else level * float(np.exp(NOISE * rng.standard_normal()))

    for _ in range(attempts):
        if rule == "restart":
            base, other = [], []
        if run(1.0) is None or run(1.0 + step) is None:  # the warm-ups
            continue
        cut = False
        while True:
            first, second = ((1.0, base), (1.0 + step, other)) if len(base) % 2 == 0 else \
                ((1.0 + step, other), (1.0, base))
            values = [run(first[0]), None]
            if values[0] is not None:
                values[1] = run(second[0])
            if values[1] is None:
                cut = True
                break
            first[1].append(values[0])
            second[1].append(values[1])
            measured += 1
            if plan.done(base, other, METRIC, FLOOR_PCT):
                # A look decided, or the last look: the test ends here either way.
                return _significant(plan, base, other), measured
        if cut and rule == "restart" and len(base) >= 2 and _significant(plan, base, other):
            return True, measured  # the old rule judged the pairs a cut-short attempt had
    return False, measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--attempts", default="1,4,10", help="comma-separated: the passes a record may take")
    parser.add_argument("--fail", type=float, default=1 / 50, help="the share of runs that fail")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"{args.trials} records a cell; 2% noise; a run fails with p {args.fail:.3g}; plan looks "
          f"{SequentialPlan.up_to(MAX_PAIRS, 0.01).looks}, alpha 1%")
    print(f"{'rule':9} {'attempts':>8} {'step':>6} {'confirmed':>10} {'pairs':>6}  target")
    with ProcessPoolExecutor(args.jobs) as pool:
        for step_widths in (0.0, 1.5):
            for attempts in (int(a) for a in args.attempts.split(",")):
                for rule in ("restart", "continue"):
                    cells = [(seed, rule, attempts, step_widths * NOISE, args.fail) for seed in range(args.trials)]
                    results = list(pool.map(trial, cells, chunksize=100))
                    share = 100 * sum(ok for ok, _ in results) / len(results)
                    pairs = sum(n for _, n in results) / len(results)
                    target = (f"<= {TARGET_PCT:g}%: " + ("met" if share <= TARGET_PCT else "MISSED")
                              if step_widths == 0 else "power")
                    print(f"{rule:9} {attempts:>8} {step_widths:>5.1f}σ {share:>9.2f}% {pairs:>6.1f}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
