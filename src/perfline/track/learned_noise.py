"""A series' run-to-run variation, learned from its own tested commits.

One run a commit cannot show how much a commit's level moves from run to run; the
neighbouring tested commits of a long series can. Over the last WINDOW tested commits
(rustc-perf's window) the relative change between each pair of neighbours is taken:
without a step in between, it varies by the between-run variation of both runs plus
each run's own sampling error. A step is not noise: neighbour changes beyond
Q3 + 3·IQR of their sizes (rustc-perf's outlier rule) are left out, so one or two steps
in the window do not inflate the estimate; the variance of the rest is the stable
stretches' variance (the RMS, not a median-based scale: it is about 2.7 times as
efficient, so 20-30 commits give the noise to about ±13%). Half of it, less the
points' own sampling variance (measured from their repetitions), is the between-run
variance one run a side must be given. Below MIN_COMMITS the assumed 1% is used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# rustc-perf's window: recent enough to follow a machine that changed, long enough that
# the estimate's own error (about 1/sqrt(2·(commits - 1))) is small.
WINDOW = 30
# Below this many tested commits (9 neighbour changes) the estimate could be off by a
# third or more; the assumed variation is used until then.
MIN_COMMITS = 10
# rustc-perf's outlier rule on the sizes of the neighbour changes.
IQR_FACTOR = 3.0


@dataclass(frozen=True)
class Noise:
    """The between-run variation (CV of a run's mean, %) a one-run side is given, and how
    many tested commits it was learned from (0: not learned, the assumed value)."""

    between_pct: float
    commits: int = 0

    @property
    def learned(self) -> bool:
        return self.commits > 0


def learn_noise(points: Sequence[Sequence[float]], assumed_pct: float) -> Noise:
    """The between-run variation of a series from its tested commits' values (one run's
    repetitions each, oldest first); `assumed_pct` until MIN_COMMITS have been tested."""
    recent = [np.asarray(values, dtype=float) for values in points[-WINDOW:]]
    if len(recent) < MIN_COMMITS or any(len(v) < 2 or (v <= 0).any() for v in recent):
        return Noise(assumed_pct)
    levels = np.log([v.mean() for v in recent])
    within = np.array([v.var(ddof=1) / len(v) / v.mean() ** 2 for v in recent])
    deltas = np.diff(levels)
    steady = _without_steps(deltas)
    # Var(delta) = 2·between² + the two points' sampling variances.
    between = float(np.mean(steady**2)) / 2 - float(np.mean(within))
    return Noise(100 * math.sqrt(max(between, 0.0)), len(recent))


def _without_steps(deltas: NDArray[np.float64]) -> NDArray[np.float64]:
    """The neighbour changes that are not steps: |delta| up to Q3 + 3·IQR of |delta|."""
    sizes = np.abs(deltas - np.median(deltas))
    q1, q3 = np.percentile(sizes, [25, 75])
    return deltas[sizes <= q3 + IQR_FACTOR * (q3 - q1)] - np.median(deltas)
