"""Short series whose points have repetitions: what the detector finds, and what knowing
the noise's correlation would buy (issue 30).

    .venv/bin/python bench/changepoint_short_series.py [--trials 200]

A tracker's first days: 20-50 commits, 5 repetitions each. A point is the run's offset
(between-run noise, AR(1) from point to point) plus independent noise per repetition;
noise is 2% of the level. Each row is run twice: by the detector as shipped, and by the
same detector told that the points are independent (the autocorrelation fixed at 0 with
no error: an oracle for white between-run noise, not a detector). Step rows print the
power (a change point within 5 points of the step); rows without a step print the
share of series with a change point at the default false-alarm rate (0.001).

The gap between the two on white noise is what the averaging over the autocorrelation's
sampling error costs at this length; the oracle's false alarms on correlated between-run
noise that is a small share of a point's variance are why the within-point spread does
not license closing that gap (docs/statistics.md, "Repetitions and short series").
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from changepoint_calibration import ar1
from perfline.stats import changepoint

NOISE = 0.02
MARGIN = 5


@dataclass(frozen=True)
class Row:
    n: int
    reps: int
    between: float  # share of a sample's variance that is the run's offset
    phi: float  # AR(1) coefficient of the offsets
    step_pct: float

    def draw(self, rng: np.random.Generator) -> list[list[float]]:
        level = np.where(np.arange(self.n) >= self.n // 2, 1.0 + self.step_pct / 100.0, 1.0)
        offsets = math.sqrt(self.between) * NOISE * ar1(rng, self.n, self.phi)
        within = math.sqrt(1.0 - self.between) * NOISE
        return [list(100.0 * level[i] * (1.0 + offsets[i] + within * rng.standard_normal(self.reps)))
                for i in range(self.n)]

    def __str__(self) -> str:
        what = f"{self.step_pct:g}% step at {self.n // 2}" if self.step_pct else "no step"
        return f"n={self.n} x{self.reps}, offsets {100 * self.between:.0f}% AR {self.phi:g}, {what}"


ROWS = [
    Row(20, 5, 0.0, 0.0, 2.0),
    Row(30, 5, 0.0, 0.0, 1.5),
    Row(20, 5, 0.36, 0.0, 3.0),
    Row(50, 5, 0.36, 0.0, 2.0),
    Row(20, 5, 0.0, 0.0, 0.0),
    Row(30, 5, 0.36, 0.0, 0.0),
    Row(30, 5, 0.2, 0.85, 0.0),
    Row(50, 5, 0.2, 0.85, 0.0),
]


@contextmanager
def independent_points() -> Iterator[None]:
    """The detector with the autocorrelation known to be 0 (the oracle)."""
    noise, differences = changepoint._noise_correlation, changepoint._difference_correlation
    changepoint._noise_correlation = lambda series, splits: changepoint._Correlation(0.0)  # type: ignore[assignment]
    changepoint._difference_correlation = lambda series: 0.0  # type: ignore[assignment]
    try:
        yield
    finally:
        changepoint._noise_correlation, changepoint._difference_correlation = noise, differences


def share(row: Row, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        found = changepoint.detect(row.draw(rng))
        hits += any(abs(c.index - row.n // 2) <= MARGIN for c in found) if row.step_pct else bool(found)
    return hits / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    print(f"{args.trials} series a row; power (step rows) or share with a false change point (target <= 0.2%)")
    print(f"  {'series':<48} {'as shipped':>10} {'rho = 0 known':>14}")
    for seed, row in enumerate(ROWS):
        shipped = share(row, args.trials, 300 + seed)
        with independent_points():
            oracle = share(row, args.trials, 300 + seed)
        print(f"  {row!s:<48} {100 * shipped:9.1f}% {100 * oracle:13.1f}%")


if __name__ == "__main__":
    main()
