"""Simulated tracking of a 1000-commit history: what each selection costs and finds.

    .venv/bin/python bench/track_sim.py [--trials 100] [--quick] [--jobs N]
                                        [--every N] [--rules learned|today]

Every trial draws a culprit uniformly from commits 50..949 and a step of 3-10% (a
lower-is-better time that got slower); the noise of one repetition is lognormal with
sd 1%, 2% or 3%, and each run of a commit also moves by a run-to-run offset of 0.5%
(what a real machine adds between runs). The tracker runs its real rules on that
history, as one pass over it (`track run` after `since` was set 1000 commits back):

- test the selected commits (every 1, 8, 32, and `daily` as every 10: a branch that
  gets 10 commits a day), one run of 5 repetitions each;
- judge: `--rules learned` (the tracker's rules now) is the tracker's own judging,
  track.judging.series_changes, on the tested commits as a series: each tested commit
  against the one before it (stats.two_sample, runs as the unit, α 0.01, floor 1%,
  the between-run variation learned from the series' last 30 tested commits), a pair
  inconclusive at 0.01 but p < 0.05 beyond the floor screened in, pooled windows of
  tested commits, the change points once it has 6 points, a screened pair that is a
  nearby change's shadow left out, each change's range every place its data cannot
  tell from it, overlapping ranges one change. `--rules today`: the assumed 1%, no
  screen, change points within 5 points of a known change that change, a change's
  range its one pair (the rules before issue 27), for the comparison in docs/track.md;
- narrow every regression opened: confirm with the sequential interleaved A/B of its two
  tested commits (at most 20 pairs; `--rules learned`: 40 for a record found at 0.01,
  track.narrowing.confirm_pairs), a record the A/B leaves inconclusive ending
  false-alarm ("not confirmed"); bisect a confirmed one with perfline's Bisection, the
  tested runs of both ends as its history (5 samples each).

Printed per selection and noise: commits tested; runs (perfline runs: a test, a side of
a confirmation, a bisection probe; the budget's unit) and executions (repetitions) of
the whole pass; records opened that were not the real change (false, per trial), how
many of them the screen opened, how many survived their confirmation (per 1000
commits), and what all false records cost (runs, executions); the real change
detected, exact (the bisection ended `found` with the culprit itself), and found-wrong
(`found`, another commit); per real regression narrowed: runs and executions of its
two tested commits, its confirmation and its bisection; the mean between-run noise the
tracker learned (%; the simulated offset is 0.5%).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from perfline.analysis.regressions import MARGIN
from perfline.analysis.series import Point, Series
from perfline.bisect import Bisection
from perfline.records.metric import Direction, Metric
from perfline.records.status import BisectionStatus
from perfline.stats.changepoint import ChangePoint, detect
from perfline.stats.sequential import SequentialPlan
from perfline.stats.two_sample import ASSUMED_BETWEEN_RUN_CV_PCT, REGRESSION
from perfline.store import RunInfo
from perfline.track.judging import judge_pair, series_changes
from perfline.track.learned_noise import Noise, learn_noise
from perfline.track.narrowing import CONFIRM_MAX_PAIRS, confirm_pairs

N_COMMITS = 1000
REPEAT = 5
BETWEEN_RUNS = 0.005
FLOOR_PCT = 1.0
METRIC = Metric("t", "s", Direction.LOWER)
SELECTIONS = {"every 1": 1, "every 8": 8, "daily (10/day)": 10, "every 32": 32}
NOISES = (0.01, 0.02, 0.03)
NARROWED = ("regression",)  # narrow: true


@dataclass(frozen=True)
class Outcome:
    tested: int
    runs: int
    executions: int
    false: int
    false_screened: int  # of `false`: opened by the screen alone
    false_confirmed: int  # of `false`: confirmed by the A/B (a false record that survives)
    false_runs: int  # runs and executions spent on false records (confirmation, bisection)
    false_executions: int
    detected: bool
    exact: bool  # the bisection ended found, naming the culprit
    wrong: bool  # the bisection ended found, naming another commit
    real_runs: int  # runs and executions spent on the real regression: its two tests,
    real_executions: int  # confirmation and bisection (0 when it was not detected)
    noise_pct: float  # the between-run variation the tracker gave one-run sides


class History:
    def __init__(self, culprit: int, step: float, noise: float, rng: np.random.Generator) -> None:
        self.culprit, self.step, self.noise, self.rng = culprit, step, noise, rng

    def run(self, commit: int, repetitions: int) -> list[float]:
        level = (1 + self.step if commit >= self.culprit else 1.0) * self.rng.lognormal(0, BETWEEN_RUNS)
        return (level * self.rng.lognormal(0, self.noise, repetitions)).tolist()


def as_series(values: list[list[float]]) -> Series:
    """The tested commits as a tracker's series: one run of REPEAT values each."""
    when = datetime(2026, 1, 1, tzinfo=UTC)
    return Series(METRIC, "sim", "k", "m", "host", [
        Point((RunInfo(i + 1, "sim", "sim", "k", "local", "6.1", "host", "sim", f"{i:040x}", "completed",
                       len(v), len(v), when, when),), tuple(v)) for i, v in enumerate(values)], "commit")


def judged_before_issue_27(values: list[list[float]]) -> list[tuple[ChangePoint, int, int]]:
    """The rules before issue 27: neighbours given the assumed 1%, no screen, change
    points within MARGIN of a known change that change, a change's range its pair."""
    between = Noise(ASSUMED_BETWEEN_RUN_CV_PCT)
    changes: list[ChangePoint] = []  # index: into the tested commits, of the first point after a change
    for i in range(1, len(values)):
        a, b = values[i - 1], values[i]
        if abs(math.log(np.mean(b) / np.mean(a))) < 0.01:
            continue  # cannot pass the 1% floor: the comparison would say so too
        judged = judge_pair(a, b, METRIC, FLOOR_PCT, between, ())
        if judged is not None and judged[0].verdict == REGRESSION:
            c = judged[0]
            changes.append(ChangePoint(i, c.change_pct, c.ci_pct, -math.log10(max(c.p_value, 1e-300)), c.p_value))
    if len(values) >= 6:
        for change in [c for c in detect(values) if c.change_pct > FLOOR_PCT]:
            if all(abs(change.index - c.index) > MARGIN for c in changes):
                changes.append(change)
    return [(c, c.index, c.index) for c in sorted(changes, key=lambda c: c.index)]


def trial(args: tuple[int, float, int, str]) -> Outcome:
    every, noise, seed, rules = args
    rng = np.random.default_rng(seed)
    culprit = int(rng.integers(50, 950))
    history = History(culprit, float(rng.uniform(0.03, 0.10)), noise, rng)
    tested = sorted({*range(0, N_COMMITS, every), N_COMMITS - 1})
    points = {c: history.run(c, REPEAT) for c in tested}
    runs, executions = len(tested), len(tested) * REPEAT
    learned = rules == "learned"
    values = [points[c] for c in tested]
    out = {"false": 0, "false_screened": 0, "false_confirmed": 0, "false_runs": 0, "false_executions": 0,
           "real_runs": 0, "real_executions": 0}
    detected = exact = wrong = False
    if learned:  # the tracker's own judging (track.judging.series_changes), regressions only
        between = learn_noise(values, ASSUMED_BETWEEN_RUN_CV_PCT)
        found = [c for c in series_changes(as_series(values), FLOOR_PCT, NARROWED) if c.point.change_pct > 0]
        ranges = [(c.point, c.first, c.last) for c in found]
        screened = {c.point.index for c in found if c.screened}
    else:
        between = Noise(ASSUMED_BETWEEN_RUN_CV_PCT)
        ranges, screened = judged_before_issue_27(values), set()
    for change, first, last in ranges:
        i = change.index
        good, bad = tested[first - 1], tested[last]
        real = good < culprit <= bad
        detected |= real
        spent_runs, spent_executions = 2, 2 * REPEAT  # its two tested commits
        strength = 0.0 if i in screened else math.inf  # what confirm_pairs reads of it
        plan = SequentialPlan.up_to(confirm_pairs(strength) if learned else CONFIRM_MAX_PAIRS, 0.01)
        a: list[float] = []
        b: list[float] = []
        while not (a and plan.done(a, b, METRIC, FLOOR_PCT)):
            drift = rng.lognormal(0, 0.002)  # shared by a pair
            a += [drift * v for v in history.run(good, 1)]
            b += [drift * v for v in history.run(bad, 1)]
        spent_runs, spent_executions = spent_runs + 2, spent_executions + 2 * len(a)
        confirmed = plan.judge(a, b, METRIC, FLOOR_PCT).verdict == REGRESSION
        if confirmed and bad - good >= 2:
            prior = [(0, v) for v in points[good]] + [(bad - good, v) for v in points[bad]]
            bisection = Bisection(bad - good + 1, prior_obs=prior)
            while (probe := bisection.next_probe()) is not None:
                bisection.observe(probe, history.run(good + probe, 1)[0])
                spent_runs, spent_executions = spent_runs + 1, spent_executions + 1
            result = bisection.result()
            found = result.status == BisectionStatus.FOUND
            exact |= real and found and good + result.culprit == culprit
            wrong |= real and found and good + result.culprit != culprit
        elif confirmed:
            exact |= real
        runs, executions = runs + spent_runs - 2, executions + spent_executions - 2 * REPEAT
        if real:
            out["real_runs"] += spent_runs
            out["real_executions"] += spent_executions
        else:
            out["false"] += 1
            out["false_screened"] += i in screened
            out["false_confirmed"] += confirmed
            out["false_runs"] += spent_runs - 2
            out["false_executions"] += spent_executions - 2 * REPEAT
    return Outcome(len(tested), runs, executions, detected=detected, exact=exact, wrong=wrong,
                   noise_pct=between.between_pct, **out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="20 trials a row")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--every", type=int, help="only this selection (every N)")
    parser.add_argument("--rules", choices=("learned", "today"), default="learned",
                        help="learned: the learned noise and the screen; today: the assumed 1%%, no screen")
    args = parser.parse_args(argv)
    trials = 20 if args.quick else args.trials
    selections = {f"every {args.every}": args.every} if args.every else SELECTIONS
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    print(f"{N_COMMITS} commits, one 3-10% step at a random commit, {trials} trials a row, "
          f"{REPEAT} repetitions a tested commit, {100 * BETWEEN_RUNS:g}% between runs, rules: {args.rules}")
    print(f"{'selection':<15} {'noise':>5} {'tested':>6} {'runs':>6} {'execs':>6} {'false':>5} {'screen':>6} "
          f"{'kept/1k':>7} {'f.runs':>6} {'f.execs':>7} {'detected':>8} {'exact':>6} {'wrong':>5} "
          f"{'runs/reg':>8} {'execs/reg':>9} {'learned':>7}")
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, every in selections.items():
            for noise in NOISES:
                seeds = [(every, noise, 1000 * every + int(1000 * noise) * 7 + t, args.rules) for t in range(trials)]
                out = list(pool.map(trial, seeds))
                found = [o for o in out if o.detected] or out
                kept = 1000 * np.mean([o.false_confirmed for o in out]) / N_COMMITS
                print(f"{name:<15} {100 * noise:4g}% {np.mean([o.tested for o in out]):6.0f} "
                      f"{np.mean([o.runs for o in out]):6.1f} {np.mean([o.executions for o in out]):6.0f} "
                      f"{np.mean([o.false for o in out]):5.2f} {np.mean([o.false_screened for o in out]):6.2f} "
                      f"{kept:7.3f} {np.mean([o.false_runs for o in out]):6.1f} "
                      f"{np.mean([o.false_executions for o in out]):7.1f} "
                      f"{100 * np.mean([o.detected for o in out]):7.1f}% {100 * np.mean([o.exact for o in out]):5.1f}% "
                      f"{100 * np.mean([o.wrong for o in out]):4.1f}% {np.mean([o.real_runs for o in found]):8.1f} "
                      f"{np.mean([o.real_executions for o in found]):9.1f} {np.mean([o.noise_pct for o in out]):6.2f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
