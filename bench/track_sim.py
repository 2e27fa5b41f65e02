"""Simulated tracking of a 1000-commit history: what each selection costs and finds.

    .venv/bin/python bench/track_sim.py [--trials 100] [--quick] [--jobs N]

Every trial draws a culprit uniformly from commits 50..949 and a step of 3-10% (a
lower-is-better time that got slower); the noise of one repetition is lognormal with
sd 1%, 2% or 3%, and each run of a commit also moves by a run-to-run offset of 0.5%
(what a real machine adds between runs). The tracker runs its real rules on that
history, as one pass over it (`track run` after `since` was set 1000 commits back):

- test the selected commits (every 1, 8, 32, and `daily` as every 10: a branch that
  gets 10 commits a day), one run of 5 repetitions each;
- judge: each tested commit against the one before it with perfline's comparison
  (stats.two_sample, runs as the unit, α 0.01, floor 1%), and the change points of the
  series (stats.changepoint) once it has 6 points; a change point within 5 points of a
  known one is that one (analysis.regressions.MARGIN);
- narrow every regression opened: confirm with the sequential interleaved A/B (at most
  20 pairs) of its two tested commits; bisect a confirmed one with perfline's Bisection,
  the tested runs of both ends as its history (5 samples each).

Printed per selection and noise: commits tested, runs (perfline runs: a test, a side of
a confirmation, a bisection probe), benchmark executions (repetitions), regressions
opened that were not the real change (false), the real change detected, and the exact
culprit found (the bisection's answer is the culprit itself).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from perfline.analysis.regressions import MARGIN
from perfline.bisect import Bisection
from perfline.records.metric import Direction, Metric
from perfline.stats.changepoint import detect
from perfline.stats.sequential import SequentialPlan
from perfline.stats.two_sample import REGRESSION, compare

N_COMMITS = 1000
REPEAT = 5
BETWEEN_RUNS = 0.005
CONFIRM_PAIRS = 20
FLOOR_PCT = 1.0
METRIC = Metric("t", "s", Direction.LOWER)
SELECTIONS = {"every 1": 1, "every 8": 8, "daily (10/day)": 10, "every 32": 32}
NOISES = (0.01, 0.02, 0.03)


@dataclass(frozen=True)
class Outcome:
    tested: int
    runs: int
    executions: int
    false: int
    detected: bool
    exact: bool


class History:
    def __init__(self, culprit: int, step: float, noise: float, rng: np.random.Generator) -> None:
        self.culprit, self.step, self.noise, self.rng = culprit, step, noise, rng

    def run(self, commit: int, repetitions: int) -> list[float]:
        level = (1 + self.step if commit >= self.culprit else 1.0) * self.rng.lognormal(0, BETWEEN_RUNS)
        return (level * self.rng.lognormal(0, self.noise, repetitions)).tolist()


def trial(args: tuple[int, float, int]) -> Outcome:
    every, noise, seed = args
    rng = np.random.default_rng(seed)
    culprit = int(rng.integers(50, 950))
    history = History(culprit, float(rng.uniform(0.03, 0.10)), noise, rng)
    tested = sorted({*range(0, N_COMMITS, every), N_COMMITS - 1})
    points = {c: history.run(c, REPEAT) for c in tested}
    runs, executions = len(tested), len(tested) * REPEAT
    # Judge: neighbours, then change points, merged within MARGIN points (as record() does).
    changes: list[int] = []  # index into `tested` of the first point after a change
    for i in range(1, len(tested)):
        a, b = points[tested[i - 1]], points[tested[i]]
        if abs(math.log(np.mean(b) / np.mean(a))) < 0.01:
            continue  # cannot pass the 1% floor: the comparison would say so too
        if compare(a, b, METRIC, floor_pct=FLOOR_PCT, base_runs=[0] * REPEAT,
                   other_runs=[1] * REPEAT).verdict == REGRESSION:
            changes.append(i)
    if len(tested) >= 6:
        for change in detect([points[c] for c in tested]):
            if change.change_pct > FLOOR_PCT and all(abs(change.index - i) > MARGIN for i in changes):
                changes.append(change.index)
    plan = SequentialPlan.up_to(CONFIRM_PAIRS, 0.01)
    false = 0
    detected = exact = False
    for i in sorted(changes):
        good, bad = tested[i - 1], tested[i]
        real = good < culprit <= bad
        detected |= real
        false += not real
        a: list[float] = []
        b: list[float] = []
        while not (a and plan.done(a, b, METRIC, FLOOR_PCT)):
            drift = rng.lognormal(0, 0.002)  # shared by a pair
            a += [drift * v for v in history.run(good, 1)]
            b += [drift * v for v in history.run(bad, 1)]
        runs, executions = runs + 2, executions + 2 * len(a)
        if plan.judge(a, b, METRIC, FLOOR_PCT).verdict != REGRESSION or bad - good < 2:
            exact |= real and bad - good == 1 and plan.judge(a, b, METRIC, FLOOR_PCT).verdict == REGRESSION
            continue
        prior = [(0, v) for v in points[good]] + [(bad - good, v) for v in points[bad]]
        bisection = Bisection(bad - good + 1, prior_obs=prior)
        while (probe := bisection.next_probe()) is not None:
            bisection.observe(probe, history.run(good + probe, 1)[0])
            runs, executions = runs + 1, executions + 1
        exact |= real and good + bisection.result().culprit == culprit
    return Outcome(len(tested), runs, executions, false, detected, exact)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="20 trials a row")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    trials = 20 if args.quick else args.trials
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    print(f"{N_COMMITS} commits, one 3-10% step at a random commit, {trials} trials a row, "
          f"{REPEAT} repetitions a tested commit, {100 * BETWEEN_RUNS:g}% between runs")
    print(f"{'selection':<16} {'noise':>5} {'tested':>7} {'runs':>7} {'executions':>10} {'false':>6} "
          f"{'detected':>9} {'exact':>6}")
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, every in SELECTIONS.items():
            for noise in NOISES:
                seeds = [(every, noise, 1000 * every + int(1000 * noise) * 7 + t) for t in range(trials)]
                out = list(pool.map(trial, seeds))
                print(f"{name:<16} {100 * noise:4g}% {np.mean([o.tested for o in out]):7.0f} "
                      f"{np.mean([o.runs for o in out]):7.1f} {np.mean([o.executions for o in out]):10.1f} "
                      f"{np.mean([o.false for o in out]):6.2f} {100 * np.mean([o.detected for o in out]):8.0f}% "
                      f"{100 * np.mean([o.exact for o in out]):5.0f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
