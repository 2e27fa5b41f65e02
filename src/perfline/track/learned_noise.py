"""A series' run-to-run variation, learned from its own tested commits.

One run a commit cannot show how much a commit's level moves from run to run; the
neighbouring tested commits of a long series can. Over the last WINDOW tested commits
(rustc-perf's window), stats.neighbour_noise gives the variance of one commit's level
from its neighbour changes, with the steps left out (a step or two in the window does
not inflate it). That variance is the between-run variation plus the level's own
sampling variance; less the points' sampling variance (measured from their
repetitions), it is the between-run variance one run a side must be given. Below
MIN_COMMITS the assumed 1% is used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfline.stats.neighbour_noise import level_variance

# rustc-perf's window: recent enough to follow a machine that changed, long enough that
# the estimate's own error (±17% of the noise from 30 commits, stats.neighbour_noise) is
# small.
WINDOW = 30
# Below this many tested commits (9 neighbour changes) the estimate could be off by a
# third or more; the assumed variation is used until then.
MIN_COMMITS = 10


@dataclass(frozen=True)
class Noise:
    """The between-run variation (CV of a run's mean, %) a one-run side is given, and how
    many tested commits it was learned from (0: not learned, the assumed value)."""

    between_pct: float
    commits: int = 0

    @property
    def learned(self) -> bool:
        return self.commits > 0

    @property
    def df(self) -> float:
        """The degrees of freedom the learned variation is worth (0 when assumed): on
        normal noise stats.neighbour_noise's variance from n levels varies as a
        chi-square of 4.9, 8.2, 11.3 and 17.9 degrees of freedom at n = 10, 15, 20, 30
        (20 000 series each): about 0.6·(n − 1); 0.55·(n − 1) errs on the cautious side."""
        return 0.55 * (self.commits - 1) if self.learned else 0.0


def learn_noise(points: Sequence[Sequence[float]], assumed_pct: float) -> Noise:
    """The between-run variation of a series from its tested commits' values (one run's
    repetitions each, oldest first); `assumed_pct` until MIN_COMMITS have been tested."""
    recent = [np.asarray(values, dtype=float) for values in points[-WINDOW:]]
    # A point without two repetitions has no sampling variance to take off; a level that
    # is not positive has no log (level_variance's None).
    if len(recent) < MIN_COMMITS or any(len(v) < 2 for v in recent):
        return Noise(assumed_pct)
    if (total := level_variance([float(v.mean()) for v in recent])) is None:
        return Noise(assumed_pct)
    within = float(np.mean([v.var(ddof=1) / len(v) / v.mean() ** 2 for v in recent]))
    return Noise(100 * math.sqrt(max(total - within, 0.0)), len(recent))
