"""A piecewise-linear change-point detector: what modelling trends buys on TCPD, and costs.

Not part of perfline and not a baseline the issue names. docs/statistics.md ("Where TCPD
is lost") uses it to measure how far a detector that models trends gets on TCPD and what
that costs on performance series. It is built like perfline's detector and calibrated
the same way, and nothing in it was picked on TCPD:

- A segment is tested for a change of level and slope by the largest F statistic over
  its splits (a line on each side against one line, each side at least MIN_SEGMENT
  points). Residuals around a least-squares line do not depend on the line, and F not
  on the noise's scale, so under white Gaussian noise the maximum's distribution
  depends on the segment's length alone: it is simulated once per length (seeded).
- Binary segmentation and refinement are perfline's own. They run twice: the second
  pass divides F by the AR(1) long-run variance factor of the residuals around the
  first pass's lines (lag-1 autocorrelation, capped at 0.9 as perfline caps it). The
  lag-1 estimate is not corrected for the lines removed: perfline's Marriott–Pope
  correction divides by 1 - 6 (segments / points) here and explodes on the short
  segments of short series (TCPD F1 0.699 with it, 0.735 without).
- `switching` keeps perfline's segmentation unless a segment of it holds a monotone
  trend, Kendall's tau against time, significant at `level` after Bonferroni over the
  segments and with independent noise assumed; then it takes the linear segmentation.
  The level says how readily the model switches, not how many false change points pass:
  each model's tests keep the false-alarm rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import NDArray
from scipy.stats import kendalltau

from perfline.stats.changepoint import (
    MIN_SEGMENT,
    _binary_segmentation,
    _refine,
    _Test,
    detect,
)

_MAX_RHO = 0.9
# The null maximum's p-value resolves 1 / (draws + 1); 4000 draws resolve the 0.001 level
# with three exceedances allowed.
_NULL_DRAWS = 4000
_BATCH_CELLS = 2_000_000


def _line_rss(
    count: NDArray[np.float64],
    t_sum: NDArray[np.float64],
    tt_sum: NDArray[np.float64],
    y_sum: NDArray[np.float64],
    ty_sum: NDArray[np.float64],
    yy_sum: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Residual sum of squares of a least-squares line, from the sums of its points."""
    t_var = tt_sum - t_sum * t_sum / count
    ty_cov = ty_sum - t_sum * y_sum / count
    return yy_sum - y_sum * y_sum / count - ty_cov * ty_cov / t_var


def _f_statistics(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """F of two lines against one at every split k = MIN_SEGMENT..m-MIN_SEGMENT, per row of y."""
    m = y.shape[-1]
    t = np.arange(m, dtype=float) - (m - 1) / 2.0  # centred: the sums stay well conditioned
    count, t_sum, tt_sum = np.arange(1.0, m + 1.0), np.cumsum(t), np.cumsum(t * t)
    y_sum, ty_sum, yy_sum = np.cumsum(y, axis=-1), np.cumsum(t * y, axis=-1), np.cumsum(y * y, axis=-1)
    left = np.arange(MIN_SEGMENT, m - MIN_SEGMENT + 1) - 1  # last index before each split
    sums = (count, t_sum, tt_sum, y_sum, ty_sum, yy_sum)
    total = [s[..., -1:] for s in sums]
    before = [s[..., left] for s in sums]
    after = [whole - part for whole, part in zip(total, before, strict=True)]
    one_line = _line_rss(*total)
    two_lines = np.maximum(_line_rss(*before) + _line_rss(*after), np.finfo(float).tiny)
    return ((one_line - two_lines) / 2.0) / (two_lines / (m - 4))


@cache
def _null_maxima(m: int) -> NDArray[np.float64]:
    """Sorted maxima of F over the splits of m points of white Gaussian noise."""
    rng = np.random.default_rng(m)
    maxima = []
    left = _NULL_DRAWS
    while left:
        rows = min(left, max(1, _BATCH_CELLS // m))
        maxima.append(_f_statistics(rng.standard_normal((rows, m))).max(axis=-1))
        left -= rows
    return np.sort(np.concatenate(maxima))


@dataclass
class _LineTester:
    """Tests segments of y for a change of line; the interface perfline's segmentation uses."""

    series: NDArray[np.float64]
    log_alpha: float
    factor: float

    def test(self, a: int, b: int) -> _Test:
        m = b - a
        if m < 2 * MIN_SEGMENT + 1:  # two lines of MIN_SEGMENT points and a residual
            return _Test(split=a, log_p=0.0, significant=False)
        f = _f_statistics(self.series[a:b])
        best = int(np.argmax(f))
        null = _null_maxima(m)
        exceeded = len(null) - int(np.searchsorted(null, f[best] / self.factor))
        log_p = math.log((exceeded + 1) / (len(null) + 1))
        return _Test(split=a + MIN_SEGMENT + best, log_p=log_p, significant=log_p < self.log_alpha)


def _line_residuals(y: NDArray[np.float64], splits: list[int]) -> NDArray[np.float64]:
    # Every segment has at least MIN_SEGMENT points: refinement drops splits closer than that.
    parts = []
    for segment in np.split(np.arange(len(y)), splits):
        slope, intercept = np.polyfit(segment, y[segment], 1)
        parts.append(y[segment] - (slope * segment + intercept))
    return np.concatenate(parts)


def _segmentation(y: NDArray[np.float64], log_alpha: float, factor: float) -> list[int]:
    tester = _LineTester(y, log_alpha, factor)
    return [t.split for t in _refine(tester, _binary_segmentation(tester))]


def _summaries(points: Sequence[Sequence[float]] | Sequence[float]) -> NDArray[np.float64]:
    return np.array([np.median(p) for p in points], dtype=float)


def linear(points: Sequence[Sequence[float]] | Sequence[float], false_alarm_rate: float = 0.001) -> list[int]:
    """Indexes of the first point after each change of level or slope (medians of repetitions)."""
    y = _summaries(points)
    log_alpha = math.log(false_alarm_rate)
    first = _segmentation(y, log_alpha, 1.0)
    residuals = _line_residuals(y, first)
    energy = float(np.sum(residuals**2))
    r1 = float(np.sum(residuals[1:] * residuals[:-1])) / energy if energy else 0.0
    rho = min(max(r1, 0.0), _MAX_RHO)
    return _segmentation(y, log_alpha, (1.0 + rho) / (1.0 - rho))


def trending(y: NDArray[np.float64], splits: Sequence[int], level: float) -> bool:
    """Whether a segment between the splits has a monotone trend (Kendall, Bonferroni)."""
    p_values = [
        kendalltau(segment, y[segment]).pvalue
        for segment in np.split(np.arange(len(y)), list(splits))
        if len(segment) >= 2 * MIN_SEGMENT and np.ptp(y[segment]) > 0
    ]
    return bool(p_values) and min(p_values) * len(p_values) < level


def switching(
    points: Sequence[Sequence[float]] | Sequence[float], level: float, false_alarm_rate: float = 0.001
) -> list[int]:
    """perfline's change points, or the linear ones where perfline's segments trend."""
    levels = [cp.index for cp in detect(points, false_alarm_rate=false_alarm_rate)]
    if trending(_summaries(points), levels, level):
        return linear(points, false_alarm_rate)
    return levels
