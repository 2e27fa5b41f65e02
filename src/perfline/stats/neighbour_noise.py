"""The variance of one level of a series, measured from its neighbouring levels.

A series tested at many commits shows its own noise: between two neighbouring tested
commits with no change of the code in between, the log levels differ by the noise of
both. Real steps are not noise and are left out by one rule: a difference is a step when
its distance from the median difference is beyond 3.5 · 1.4826 · MAD (a modified
z-score beyond 3.5, Iglewicz and Hoaglin: the cut of stats.two_sample's outlier marker,
without its fallback to the mean absolute deviation where the MAD is 0, which here
would take a count's steps for its noise). Why this rule:

- a count that mostly repeats exactly gives 0, as it should: when more than half the
  differences equal the median, the median absolute deviation is 0, so every other
  difference is a step. (rustc-perf's Q3 + 3·IQR needs three quarters to repeat: a count
  series whose code changes at a third of its commits would be given the steps' noise.)
- a few real steps do not move it: the cut is set by the median of the differences'
  distances, which steps barely shift while they are fewer than half. A step below the
  cut (3.5 of the differences' standard deviations) counts as noise: one neighbour
  comparison could not tell it from noise either.
- on normal differences it cuts where rustc-perf's rule does (3.5 against 3.6 standard
  deviations), keeping 99.95% of them: the variance of those kept is 0.6% low.

The variance of the differences kept is then taken as it is (their mean square about the
median difference, which also takes out a steady drift), not as a median-based scale:
on normal noise, 30 levels give the standard deviation to ±17% (the median neighbour
difference's scale: ±24%, so it needs twice the commits), 0.98 of the true one on
average (0.93 from 10 levels, where the cut, set by few differences, sometimes cuts
noise; 20 000 simulated series each). A difference of two levels has twice one level's
variance, so half of it is the variance of one level: its between-run variation plus its
own sampling variance. Callers keep their own window and minimum number of levels
(track.learned_noise, stats.counted.history_noise).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

# Iglewicz and Hoaglin's cut on the modified z-score |d − median| / (1.4826 · MAD).
MODIFIED_Z_CUT = 3.5
# A normal variable's standard deviation in its median absolute deviations.
_MAD_TO_SD = 1.4826


def level_variance(levels: Sequence[float] | NDArray[np.float64]) -> float | None:
    """The relative variance of one level (a fraction squared) from a series' levels, one
    per tested commit, in order, steps left out (module docstring); None with fewer than
    two levels or a level that is not positive."""
    level = np.asarray(levels, dtype=float)
    if len(level) < 2 or (level <= 0).any():
        return None
    deltas = np.diff(np.log(level))
    distance = np.abs(deltas - np.median(deltas))
    kept = distance[distance <= MODIFIED_Z_CUT * _MAD_TO_SD * np.median(distance)]
    return float(np.mean(kept**2)) / 2
