"""Comparing counts (instructions, estimated cycles): a metric whose noise is measured,
not assumed, and is often zero.

A count of the same program on the same input repeats exactly, or within a few
instructions (a hash seeded at random, a timer read, the environment's length), so the
timed metrics' machinery — at least five samples a side, 1% assumed between runs — would
throw away what makes counts useful: one run a side decides a small step. Instead:

- The noise is measured: the spread of the repetitions of each side (when a side has
  two or more), and, where a series has a history, the spread of its neighbouring
  commits' values (`history_noise`, through stats.neighbour_noise: a few real steps
  are left out, and most neighbours sharing their count give 0). With neither, it
  is not known and the comparison falls back to `two_sample.compare`.
- The change is decided when it is beyond the floor and its test passes: a t test on
  the log ratio with that noise (the repetitions' degrees of freedom; a history's noise
  is taken as known); where the noise is 0, any change beyond the floor is decided,
  with one value a side.
- `no change` when the interval lies inside ±floor, as for timed metrics.

Counts from different counters are different metrics (benchmarks.counting names the
counter in the metric), so nothing here needs to guard against mixing them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray
from scipy.special import stdtr, stdtrit

from perfline.records.metric import Metric
from perfline.stats.neighbour_noise import level_variance
from perfline.stats.two_sample import Comparison, compare, verdict_of

METHOD_COUNTED = "counted"
# A count's history shows from this many neighbour differences whether it repeats (two of
# three equal give 0). Fewer than a timed series needs (track.learned_noise.MIN_COMMITS):
# a count mostly repeats, and where its sides have repetitions their spread is measured
# too and the larger noise used.
HISTORY_MIN_PAIRS = 3
# A count's practical floor: a floor given for timed metrics (1% by default) applies to
# counts only up to this. Half a percent more instructions is a real change of the code,
# which the count sees without noise; 0.1% stays above what an environment variable or a
# path's length moves in a short program's count.
COUNTED_FLOOR_PCT = 0.1


def counted_floor(floor_pct: float) -> float:
    return min(floor_pct, COUNTED_FLOOR_PCT)


def noise_pct(values: Sequence[NDArray[np.float64]]) -> float | None:
    """The relative standard deviation of one value, pooled over groups that each
    measured the same thing (a side's repetitions); None when no group has two."""
    found = _pooled(values)
    return None if found is None else found[0]


def _pooled(values: Sequence[NDArray[np.float64]]) -> tuple[float, int] | None:
    """(relative sd in %, its degrees of freedom) of groups' repetitions."""
    squares, df = 0.0, 0
    for group in values:
        if len(group) >= 2 and (mean := float(np.mean(group))) > 0:
            squares += float(np.sum((np.asarray(group) / mean - 1) ** 2))
            df += len(group) - 1
    return (100 * math.sqrt(squares / df), df) if df else None


def history_noise(levels: Sequence[float]) -> float | None:
    """The noise of one value (relative sd, %) from a series' neighbouring levels (one per
    tested commit, in order), the steps among them left out (stats.neighbour_noise): 0
    when most neighbours repeat exactly, whatever the few that differ; None with fewer
    than HISTORY_MIN_PAIRS neighbours."""
    if len(levels) < HISTORY_MIN_PAIRS + 1:
        return None
    variance = level_variance(levels)
    return None if variance is None else 100 * math.sqrt(variance)


def compare_counted(
    base: Sequence[float] | NDArray[np.float64],
    other: Sequence[float] | NDArray[np.float64],
    metric: Metric,
    *,
    alpha: float = 0.01,
    floor_pct: float = 1.0,
    confidence: float = 0.95,
    history_noise_pct: float | None = None,
) -> Comparison:
    """`other` against `base` for a count, with its noise measured (module docstring)."""
    b, o = np.asarray(base, dtype=float), np.asarray(other, dtype=float)
    # Each measure of the noise with its degrees of freedom: the repetitions' (few, so
    # a t quantile), the history's (many neighbours: taken as known).
    measured = [m for m in (_pooled([b, o]), None if history_noise_pct is None else (history_noise_pct, math.inf))
                if m is not None]
    # The timed comparison gives the summaries and outliers, and is the answer where the
    # noise is not measured.
    timed = compare(b, o, metric, alpha=alpha, floor_pct=floor_pct, confidence=confidence)
    if not measured or not len(b) or not len(o) or (b <= 0).any() or (o <= 0).any():
        return timed
    noise_level, df = max(measured)
    noise = noise_level / 100
    log_change = math.log(float(np.mean(o)) / float(np.mean(b)))
    se = noise * math.sqrt(1 / len(b) + 1 / len(o))
    if se > 0:
        margin = float(stdtrit(df, (1 + confidence) / 2)) * se
        p_value = float(2 * stdtr(df, -abs(log_change) / se))
    else:
        margin, p_value = 0.0, 1.0 if log_change == 0 else 0.0
    ci_pct = (100 * math.expm1(log_change - margin), 100 * math.expm1(log_change + margin))
    change_pct = 100 * math.expm1(log_change)
    significant = p_value < alpha and abs(change_pct) > floor_pct
    # More repetitions of a count only repeat it: an undecided count needs a smaller
    # floor, not more samples (more_samples None).
    return replace(timed, change_pct=change_pct, ci_pct=ci_pct, p_value=p_value, p_value_rank=math.nan,
                   significant=significant, method=METHOD_COUNTED, more_samples=None, unit="samples",
                   verdict=verdict_of(metric.direction, change_pct, ci_pct, significant, True, floor_pct))
