"""The change-point detector's calibration, each row against its target (issue 13).

    .venv/bin/python bench/changepoint_calibration.py [--nulls 3000] [--steps 600] [--quick]

Called by bench/calibration.py as its section (e); runs alone too. Every row simulates
seeded series and runs perfline's detector (stats.changepoint.detect) on them:

- false alarms: the share of series without any change that get a change point, at the
  default false-alarm rate (0.001) and at 0.01; target <= 2x the rate. White noise and
  AR(1) noise at phi 0.5, 0.7, 0.85, at n 50, 200 and 1000; and series whose points have
  different numbers of repetitions (a tracker's 8 a commit beside bisection probes'
  single runs).
- steps: the power to find a real step (a change point within 5 points of it), and,
  of the change points found there, the mean of recorded / true change and how often
  the recorded 95% interval covers the true change; target coverage >= 90%.

Noise is 2% of the level (normal); AR(1) noise has that marginal spread. A point with
several repetitions is the run's own offset (between-run noise, correlated from point
to point) plus independent noise per repetition.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter
from scipy.stats import beta

from perfline.stats.changepoint import detect

NOISE = 0.02
MARGIN = 5  # a change point this close to the true step found it (TCPDBench's margin)
RATES = (0.001, 0.01)
TARGET_FACTOR = 2.0
TARGET_COVERAGE = 0.90

Points = list[list[float]]


def ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """Stationary AR(1) noise of unit variance."""
    start = rng.standard_normal()
    innovations = rng.standard_normal(n) * math.sqrt(1.0 - phi * phi)
    out, _ = lfilter([1.0], [1.0, -phi], innovations, zi=[phi * start])
    return np.asarray(out)


@dataclass(frozen=True)
class Scenario:
    name: str
    n: int
    phi: float = 0.0
    # Repetitions of each point; None: one value a point, all noise AR(1).
    reps: Callable[[int], np.ndarray] | None = None
    # With repetitions: between-run spread and within-run spread, as shares of NOISE.
    between: float = 0.0
    step_pct: float = 0.0
    at: int = 0

    def draw(self, rng: np.random.Generator) -> Points:
        level = np.where(np.arange(self.n) >= self.at, 1.0 + self.step_pct / 100.0, 1.0) if self.step_pct \
            else np.ones(self.n)
        if self.reps is None:
            return (100.0 * level * (1.0 + NOISE * ar1(rng, self.n, self.phi)))[:, None].tolist()
        counts = self.reps(self.n)
        offsets = self.between * NOISE * ar1(rng, self.n, self.phi)
        within = math.sqrt(1.0 - self.between**2) * NOISE
        return [(100.0 * level[i] * (1.0 + offsets[i] + within * rng.standard_normal(int(c)))).tolist()
                for i, c in enumerate(counts)]


def one_then_eight(n: int) -> np.ndarray:
    """The first half of the points single runs, the rest 8 repetitions."""
    return np.where(np.arange(n) < n // 2, 1, 8)


def probes_among_eight(n: int) -> np.ndarray:
    """8 repetitions a point, every 5th point a bisection probe of one run."""
    return np.where(np.arange(n) % 5 == 2, 1, 8)


def null_scenarios() -> list[Scenario]:
    rows = [Scenario(f"white, n={n}", n) for n in (50, 200, 1000)]
    rows += [Scenario(f"AR {phi}, n={n}", n, phi) for phi in (0.5, 0.7, 0.85) for n in (50, 200, 1000)]
    rows += [
        Scenario("1 rep then 8, n=100", 100, reps=one_then_eight),
        Scenario("1 rep then 8, n=200", 200, reps=one_then_eight),
        Scenario("1 rep then 8, between-run 1/2, n=200", 200, reps=one_then_eight, between=math.sqrt(0.5)),
        Scenario("8 reps, 1 in 5 a 1-rep probe, n=200", 200, reps=probes_among_eight),
        Scenario("1 rep then 8, between 1/2, AR 0.5, n=200", 200, 0.5, one_then_eight, math.sqrt(0.5)),
    ]
    return rows


def step_scenarios() -> list[Scenario]:
    return [
        Scenario("white n=200, 1% at 120", 200, step_pct=1.0, at=120),
        Scenario("white n=200, 1.5% at 120", 200, step_pct=1.5, at=120),
        Scenario("white n=200, 3% at 120", 200, step_pct=3.0, at=120),
        Scenario("white n=50, 2% at 30", 50, step_pct=2.0, at=30),
        Scenario("white n=50, 4% at 30", 50, step_pct=4.0, at=30),
        Scenario("white n=1000, 0.5% at 600", 1000, step_pct=0.5, at=600),
        Scenario("AR 0.5 n=200, 2% at 120", 200, 0.5, step_pct=2.0, at=120),
        Scenario("AR 0.5 n=200, 4% at 120", 200, 0.5, step_pct=4.0, at=120),
        Scenario("AR 0.5 n=50, 4% at 30", 50, 0.5, step_pct=4.0, at=30),
        Scenario("AR 0.85 n=200, 6% at 120", 200, 0.85, step_pct=6.0, at=120),
        Scenario("1 rep then 8 n=200, 1% at 150", 200, reps=one_then_eight, step_pct=1.0, at=150),
        Scenario("1 rep then 8 n=200, 1.5% at 60", 200, reps=one_then_eight, step_pct=1.5, at=60),
        Scenario("8 reps + probes n=200, 1% at 120", 200, reps=probes_among_eight, between=math.sqrt(0.5),
                 step_pct=1.0, at=120),
    ]


def _upper(count: int, trials: int) -> float:
    """One-sided 95% Clopper-Pearson upper bound of a rate."""
    return float(beta.ppf(0.95, count + 1, trials - count)) if count < trials else 1.0


def null_row(scenario: Scenario, trials: int, seed: int) -> bool:
    rng = np.random.default_rng(seed)
    alarms = dict.fromkeys(RATES, 0)
    for _ in range(trials):
        points = scenario.draw(rng)
        for rate in RATES:
            alarms[rate] += bool(detect(points, false_alarm_rate=rate))
    cells = []
    ok = True
    for rate in RATES:
        share = alarms[rate] / trials
        ok &= share <= TARGET_FACTOR * rate
        cells.append(f"{100 * share:6.2f}% ({share / rate:4.1f}x, <= {100 * _upper(alarms[rate], trials):5.2f}%)")
    print(f"  {scenario.name:<42} {trials:>6}  " + "  ".join(cells) + f"  {'ok' if ok else 'MISS'}")
    return ok


def step_row(scenario: Scenario, trials: int, seed: int) -> bool:
    rng = np.random.default_rng(seed)
    found = covered = 0
    ratios = []
    truth = scenario.step_pct
    for _ in range(trials):
        near = [c for c in detect(scenario.draw(rng)) if abs(c.index - scenario.at) <= MARGIN]
        if near:
            change = near[0]
            found += 1
            ratios.append(change.change_pct / truth)
            covered += change.ci_pct[0] <= truth <= change.ci_pct[1]
    coverage = covered / found if found else math.nan
    ok = not found or coverage >= TARGET_COVERAGE
    ratio = f"{np.mean(ratios):5.2f}" if ratios else "  n/a"
    print(f"  {scenario.name:<42} {trials:>6}  power {100 * found / trials:5.1f}%  recorded/true {ratio}  "
          f"CI covers {100 * coverage:5.1f}%  {'ok' if ok else 'MISS'}")
    return ok


def report(nulls: int, steps: int) -> None:
    print(f"false alarms per series without a change: share at {' and at '.join(map(str, RATES))} "
          f"(x the rate, 95% upper bound); target <= {TARGET_FACTOR:g}x")
    print(f"  {'series':<42} {'trials':>6}")
    missed = []
    for seed, scenario in enumerate(null_scenarios()):
        # 1000-point series cost several times more; fewer of them still bound the rate.
        trials = nulls if scenario.n < 1000 else max(nulls // 3, 100)
        if not null_row(scenario, trials, 100 + seed):
            missed.append(scenario.name)
    print(f"\nsteps at the default rate, {steps} series a row; a find is within {MARGIN} points of the step; "
          f"target CI coverage >= {100 * TARGET_COVERAGE:g}%")
    for seed, scenario in enumerate(step_scenarios()):
        trials = steps if scenario.n < 1000 else max(steps // 3, 100)
        if not step_row(scenario, trials, 200 + seed):
            missed.append(scenario.name)
    print(f"\nrows missing their target: {', '.join(missed) if missed else 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nulls", type=int, default=3000, help="series a false-alarm row (a third at n=1000)")
    parser.add_argument("--steps", type=int, default=600, help="series a step row (a third at n=1000)")
    parser.add_argument("--quick", action="store_true", help="300 null and 100 step series a row: a smoke run")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    if args.quick:
        args.nulls, args.steps = 300, 100
    report(args.nulls, args.steps)


if __name__ == "__main__":
    main()
