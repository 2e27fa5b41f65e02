"""Change points in a performance series: where its level shifts, by how much, how surely.

The method is written up in docs/statistics.md ("Change-point detection"); in short:

- Each point is scored by the mean mid-rank of its repetitions among all samples of the
  segment under test, so outliers and heavy tails weigh no more than any other sample
  and a point with several agreeing repetitions scores sharper than a single run. When
  points hold different numbers of repetitions, each score is standardized by its
  spread under no change (between-run plus within-run variance over the count).
- A segment is tested with the standardized two-sample rank scan (a Mann–Whitney z for
  every split), divided by the long-run variance factor of AR(1) noise.
- The p-value is that of the *maximum* over all splits under the null of no change:
  Siegmund's tail approximation for the maximum of a standardized bridge (with his
  discreteness correction) on long segments, a seeded permutation test on short ones.
  A split is made when it is below the false-alarm rate.
- Binary segmentation, then each change point is re-tested between its neighbours,
  re-placed, and dropped unless still significant. This runs twice: first with the
  least autocorrelation that differences of the scores allow, then with the
  autocorrelation of the residuals around the first segmentation's levels, the
  p-values averaged over that estimate's sampling error.
- Magnitude: Hodges–Lehmann shift between the neighbouring segments (on log values when
  all are positive), with the Mann–Whitney (Moses) interval widened by the same
  long-run variance factor, both then estimated given that the change was found (a
  normal truncated at the test's critical value), so that changes found near the level
  are not overstated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property, lru_cache, partial
from itertools import chain, count
from operator import itemgetter
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtri

from perfline.stats.changepoint_kernels import (
    Doubles,
    any_ties,
    decide,
    difference_quantiles,
    difference_sums,
    distinct_order,
    doubles,
    log_tail,
    rank_scan,
    reach,
    read_points,
    residual_sums,
    tail_bound,
)

# A change needs this many points on each side. One or two deviant points in a row look
# the same as outliers; with single-run points the rank scan could not make them
# significant anyway, with repetitions it could, and that is what we rule out.
MIN_SEGMENT = 3

# Long-run variance factor (1 + rho) / (1 - rho) is capped at rho = 0.9, i.e. at 19: a
# series more correlated than that is a trend or a random walk, not noise around a
# level, and dividing by an unbounded factor would hide every change in it.
_MAX_RHO = 0.9

# Segments up to this many points that the tail approximation does not already find
# significant get a permutation p-value: there the approximation is too conservative
# (rank statistics are bounded, most of all near the ends).
_PERMUTATION_MAX_POINTS = 150
# Sequential Monte Carlo (Besag & Clifford): stop after this many permuted statistics at
# least as large as the observed one, since the p-value is then clearly above the level.
_PERMUTATION_STOP_EXCEEDANCES = 10
_PERMUTATION_MAX_DRAWS = 100_000
_PERMUTATION_BATCH_CELLS = 2_000_000

# Hodges–Lehmann on all pairs is O(n1 * n2); beyond this many points per side the
# points nearest to the change are used, which is also the level a reader compares.
_MAGNITUDE_MAX_SIDE = 150
_CI_LEVEL = 0.95
_CI_Z = float(ndtri(0.5 + _CI_LEVEL / 2.0))  # the normal quantile of the interval's ends
# The p-value's sum leaves out splits no arrangement of the scores can make extreme
# enough; that is checked for this many splits at each end, where it matters.
_REACH_EDGE = 64
# Further in, the sum's terms change smoothly from split to split and the sum is an
# integral, taken by Gauss-Legendre quadrature on this many nodes of each half: a test
# costs the same at 10,000 points as at 200 (the sum itself was 90 % of the time).
_QUADRATURE_NODES = 16
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(2 * _QUADRATURE_NODES)
# The upper half of the symmetric rule, on [0, 1].
_GL_NODES, _GL_WEIGHTS = _GL_NODES[_QUADRATURE_NODES:], _GL_WEIGHTS[_QUADRATURE_NODES:]
_MAX_MOVE_ROUNDS = 5
# Segments whose samples in order are kept for their sub-segments' (the most recent ones:
# binary segmentation goes depth first). A segment looks for the smallest around it
# among them, and a series with hundreds of change points must not make that the work.
_ORDERS_KEPT = 32
# Nodes and weights of the Gauss-Hermite average over the autocorrelation's sampling error.
_RHO_NODES, _RHO_WEIGHTS = np.polynomial.hermite_e.hermegauss(5)
_RHO_WEIGHTS /= _RHO_WEIGHTS.sum()
# One node, of weight 1, where rho is taken as known.
_KNOWN = (np.zeros(1), np.ones(1))
# P(Z >= z | selected) at the conditional interval's lower end, middle, upper end.
_SELECTED_QUANTILES = (0.025, 0.5, 0.975)
# How closely a critical |z| is solved for, and how many Newton steps may be taken
# before bisection (2-4 reach the tolerance where log p is smooth there). Newton's slope
# leaves out the sum's own, a few % of it, so the error after a step is a few % of the
# step: stopping at a step of 2e-4 leaves about 1e-5 (brentq's tolerance was 1e-3).
_CRITICAL_XTOL = 2e-4
_NEWTON_STEPS = 8
# An estimate's z this far above the critical value is not moved by the selection: the
# truncated normal's quantiles differ from the plain one's by less than 1e-12.
_UNSELECTED_MARGIN = 10.0


@dataclass(frozen=True)
class ChangePoint:
    index: int  # 0-based index of the first point after the change
    change_pct: float  # % change of the level after vs before (Hodges–Lehmann)
    ci_pct: tuple[float, float]  # 95% CI of change_pct
    strength: float  # -log10(p_value)
    p_value: float  # of the best split between the neighbouring change points, calibrated for being the best


@dataclass(frozen=True)
class _TailTerms:
    """Siegmund's sum over a segment's splits as terms weight * nu(z * scale).

    The splits nearest each end are one term each, with the largest |z| any order of the
    scores could give there (`reach`); the sum over the splits further in is an integral
    over the log-odds of the split, u = log(k / (m - k)), where a split's term is
    nu(z sqrt((2 + 2 cosh u) / m)) du: the quadrature's nodes are terms too, reachable.
    """

    weights: NDArray[np.float64]
    scales: NDArray[np.float64]
    reach: NDArray[np.float64]  # before the long-run variance correction


@dataclass(frozen=True)
class _Scan:
    """What a segment's test needs that does not depend on the noise's correlation."""

    # The points' scores minus their mean, in a unit of the segment's: integers where
    # every point has as many samples.
    scores: NDArray[np.float64 | np.int64]
    z: float  # largest |z| over the splits, before the long-run variance correction
    best: int  # offset of that split's first point after it, within the segment
    spread: float  # root mean square of the centred scores
    # The points in ascending order of their scores, where the ranks give it (one sample a point).
    order: NDArray[np.intp] | None

    @cached_property
    def centred(self) -> NDArray[np.float64]:
        """The centred scores as floats (only some tests need them)."""
        return self.scores.astype(np.float64, copy=False)

    @cached_property
    def tail(self) -> _TailTerms:
        """The terms of the tail approximation's sum over the splits, for the tests that
        a bound does not decide."""
        ordered = None
        if self.order is not None:  # only the ends are needed
            m = len(self.order)
            edge = min(_REACH_EDGE, m - 1)
            ordered = self.scores[self.order if m <= 2 * edge else
                                  np.concatenate((self.order[:edge], self.order[m - edge :]))]
        return _tail_terms(self.scores, ordered, self.spread)


@dataclass(frozen=True)
class _Series:
    """Points with at least one finite value, flattened for vectorized ranking."""

    values: NDArray[np.float64]  # all samples, point after point
    starts: NDArray[np.intp]  # offset of each point's first sample; one extra at the end
    summaries: NDArray[np.float64]  # median of each point's samples
    positions: NDArray[np.intp]  # index of each kept point in the caller's sequence
    # The number of samples of every point, or 0 when they differ (then a segment's
    # points may still hold as many each).
    repetitions: int = field(init=False, repr=False)
    # Whether any two samples share a value; if none do, no segment needs mid-ranks.
    tied: bool = field(init=False, repr=False)
    # Offsets of the samples of a segment (points a..b-1) from its first sample, in the
    # order of their values, for the whole series and the segments scanned last. A
    # segment's are those of the smallest such segment around it that fall within it:
    # O(m) to pick out, where sorting each segment again was O(m log m).
    _orders: dict[tuple[int, int], NDArray[np.intp]] = field(default_factory=dict, repr=False)
    # Both passes and every refinement round test many of the same segments.
    _scans: dict[tuple[int, int], _Scan | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # As many samples as points, none without: one each (no pass over the points).
        object.__setattr__(self, "repetitions", 0 if not len(self) else
                           1 if len(self.values) == len(self) else _common_count(self.starts))
        order = distinct_order(self.values)
        tied = False
        if order is None:
            # Ties get their mid-rank whichever way they were ordered: no stable sort needed.
            order = np.argsort(self.values)
            tied = any_ties(self.values, order)
        object.__setattr__(self, "tied", tied)
        self._orders[0, len(self)] = order

    def __len__(self) -> int:
        return len(self.summaries)

    @cached_property
    def positive(self) -> bool:
        """Whether every point's summary is above 0 (then every change's window is)."""
        return bool(len(self) and self.summaries.min() > 0)

    def scan(self, a: int, b: int) -> _Scan | None:
        """The rank scan of points a..b-1; None when all their scores tie."""
        if (a, b) not in self._scans:
            self._scans[a, b] = self._rank_scan(a, b)
        return self._scans[a, b]

    def _rank_scan(self, a: int, b: int) -> _Scan | None:
        """Each point scores the mean mid-rank of its samples among all samples of the
        segment. With r samples to every point, twice a point's rank sum less its mean,
        r (size + 1), is an integer: the partial sums over the splits are exact integer
        sums.

        When the points hold different numbers of samples, each mean is standardized by
        its spread under no change: a mean of 8 repetitions varies less than a single
        run, and unequal spreads would make the points' order matter under the null.
        """
        lo = int(self.starts[a])
        size = int(self.starts[b]) - lo
        m = b - a
        r = self.repetitions or _common_count(self.starts[a : b + 1])
        # The samples' order, picked from the smallest segment around this one whose
        # order is kept; twice each sample's mid-rank less twice their mean (size + 1);
        # with equal counts the points' sums of them and the scan of their partial sums.
        around = (a, b) if (a, b) in self._orders else \
            min([(end - start, start, end) for start, end in self._orders if start <= a and b <= end])[1:]
        ranked = rank_scan(self._orders[around], lo - int(self.starts[around[0]]), size,
                           self.values[lo : lo + size] if self.tied else None, r, _split_spread(m) if r else None)
        if around != (a, b):
            if len(self._orders) > _ORDERS_KEPT:  # the whole series' stays first
                del self._orders[next(k for i, k in enumerate(self._orders) if i)]
            self._orders[a, b] = ranked.order
        if ranked.scores is not None:
            scores: NDArray[np.float64 | np.int64] = ranked.scores
            energy, z, best = ranked.energy, ranked.z, ranked.best
        else:
            ranks = np.multiply(ranked.in_place + (size + 1), 0.5, dtype=np.float64)  # the mid-ranks
            ranks /= size
            offsets = self.starts[a:b] - lo
            counts = np.diff(self.starts[a : b + 1])
            means = np.add.reduceat(ranks, offsets) / counts
            standardized = (means - ranks.mean()) / np.sqrt(_point_variances(ranks, offsets, counts, means))
            scores = standardized - standardized.mean()
            energy = float(np.dot(scores, scores))
            splits = np.abs(np.cumsum(scores)[MIN_SEGMENT - 1 : m - MIN_SEGMENT]) / _split_spread(m)
            best = MIN_SEGMENT + int(np.argmax(splits))
            z = float(splits[best - MIN_SEGMENT])
        if energy == 0.0:
            return None
        spread = math.sqrt(energy / m)
        # With one sample a point the scores' order is the samples'.
        return _Scan(scores, z / spread, best, spread, ranked.order if r == 1 else None)


def detect(
    points: Sequence[Sequence[float]] | Sequence[float],
    *,
    false_alarm_rate: float = 0.001,
    seed: int = 0,
) -> list[ChangePoint]:
    """Change points of a series whose points are values or lists of repetitions.

    `false_alarm_rate` is the level of every test (one per segment), so a series without
    a change gets a false change point with about that probability, and a series with
    changes about that many per segment. Points without a finite value are skipped;
    indexes refer to positions in `points`.
    """
    if not 0.0 < false_alarm_rate < 1.0:
        raise ValueError("false_alarm_rate must be between 0 and 1")
    series = _to_series(points)
    if len(series) < 2 * MIN_SEGMENT:
        return []
    log_alpha = math.log(false_alarm_rate)
    # Made only if a permutation test needs it (most series: none), then shared by both passes.
    rng = cache(partial(np.random.default_rng, seed))
    # The first pass assumes the least correlation that differences of the scores
    # (robust to steps) allow: assuming none cuts strongly correlated noise into many
    # short segments, whose residuals then understate the correlation.
    first = _Tester(series, log_alpha, _Correlation(_difference_correlation(series)), rng)
    splits = [t.split for t in _refine(first, _binary_segmentation(first))]
    correlation = _noise_correlation(series, splits)
    # The noise's autocorrelation is estimated from residuals around the first pass's
    # levels; the second pass averages its p-values over that estimate's error.
    # Estimating it without removing the levels would take every step for correlation;
    # iterating further would feed on itself, as a more cautious pass leaves steps in
    # the residuals and raises the estimate again.
    tester = _Tester(series, log_alpha, correlation, rng)
    found = _refine(tester, _binary_segmentation(tester))
    bounds = [0, *(t.split for t in found), len(series)]
    return [_describe(series, bounds[i], t._replace(log_p=tester.exact(bounds[i], bounds[i + 2]).log_p),
                      bounds[i + 2], tester)
            for i, t in enumerate(found)]


def _to_series(points: Sequence[Sequence[float]] | Sequence[float]) -> _Series:
    if isinstance(points, np.ndarray) and 1 <= points.ndim <= 2:
        table = np.asarray(points, dtype=float).reshape(len(points), -1)
        return _from_samples(table.ravel(), table.shape[1])
    if isinstance(points, list) and points and isinstance(points[0], list) and points[0]:
        # Lists of as many floats each (the callers' case), read in C.
        read = read_points(points, len(points[0]))
        if read is not None:
            return _from_samples(read, len(points[0]))
    try:
        lengths = set(map(len, points))  # type: ignore[arg-type]
        if lengths == {1}:  # one value a point: read without flattening
            values = np.fromiter(map(itemgetter(0), points), dtype=np.float64, count=len(points))  # type: ignore[arg-type]
            return _from_samples(values, 1)
        # Lists of repetitions, flattened without numpy's discovery of a nested list's
        # shape, which took longer than the detection of a 10,000-point series. (Not by
        # zip(*points): its 10,000 iterators alive at once set off the garbage collector.)
        if len(lengths) == 1:
            counts = np.full(len(points), lengths.pop(), dtype=np.intp)
        else:
            counts = np.fromiter(map(len, points), dtype=np.intp, count=len(points))  # type: ignore[arg-type]
        values = np.fromiter(chain.from_iterable(points), dtype=np.float64, count=int(counts.sum()))  # type: ignore[arg-type]
    except TypeError:  # values, or values and lists mixed
        groups = [np.atleast_1d(np.asarray(p, dtype=float)).ravel() for p in points]
        counts = np.array([g.size for g in groups], dtype=np.intp)
        values = np.concatenate(groups) if groups else np.empty(0)
    return _from_samples(values, counts)


def _from_samples(values: NDArray[np.float64], counts: NDArray[np.intp] | int) -> _Series:
    """The series of points with `counts` samples each (an int: as many every point),
    `values` point after point; samples that are not finite are dropped, and points
    left without any."""
    finite = np.isfinite(values)
    if isinstance(counts, int):
        if finite.all() and counts:
            # The common case without the general one's passes over the points.
            n = len(values) // counts
            summaries = values if counts == 1 else np.median(values.reshape(n, counts), axis=1)
            return _Series(values=values, starts=np.arange(0, len(values) + 1, counts, dtype=np.intp),
                           summaries=summaries, positions=np.arange(n, dtype=np.intp))
        counts = np.full(len(values) // counts if counts else 0, counts, dtype=np.intp)
    if not finite.all():
        counts = np.bincount(np.repeat(np.arange(len(counts)), counts)[finite], minlength=len(counts))
        values = values[finite]
    positions = np.flatnonzero(counts)
    counts = counts[positions]
    starts = np.concatenate(([0], np.cumsum(counts))).astype(np.intp)
    if len(counts) and counts.max() == 1:
        summaries = values.copy()
    elif len(counts) and counts.min() == counts.max():
        summaries = np.median(values.reshape(len(counts), -1), axis=1)
    else:
        # Each point's samples in order, then the middle one or two of each.
        ordered = values[np.lexsort((values, np.repeat(np.arange(len(counts)), counts)))]
        summaries = (ordered[starts[:-1] + (counts - 1) // 2] + ordered[starts[:-1] + counts // 2]) / 2.0
    return _Series(values=values, starts=starts, summaries=summaries, positions=positions.astype(np.intp))


def _binary_segmentation(tester: _Tester) -> list[int]:
    splits: list[int] = []
    pending = [(0, len(tester.series))]
    while pending:
        a, b = pending.pop()
        test = tester.test(a, b)
        if test.significant:
            splits.append(test.split)
            pending += [(a, test.split), (test.split, b)]
    return sorted(splits)


def _refine(tester: _Tester, splits: list[int]) -> list[_Test]:
    """Re-test every change point between its neighbours until all pass and none moves.

    Binary segmentation found each split in a segment that may have held other changes;
    tested between its final neighbours a split can lose its significance or have a
    better place. The weakest failing split goes first, as its removal changes the
    neighbourhood of the others.
    """
    current = sorted(splits)
    moves = 0
    while True:
        bounds = [0, *current, len(tester.series)]
        tests = [tester.test(bounds[i], bounds[i + 2]) for i in range(len(current))]
        failing = [i for i, t in enumerate(tests) if not t.significant]
        if failing:
            # (The p-value of a split a bound put above the level is worked out only here.)
            weakest = failing[0] if len(failing) == 1 else \
                max(failing, key=lambda i: tester.exact(bounds[i], bounds[i + 2]).log_p)
            del current[weakest]
            continue
        moved = sorted({t.split for t in tests})
        # Moves could in principle cycle between neighbours; a few rounds settle them.
        if moved == current or moves == _MAX_MOVE_ROUNDS:
            return [t._replace(split=c) for c, t in zip(current, tests, strict=True)]
        current = moved
        moves += 1


def _noise_correlation(series: _Series, splits: list[int]) -> _Correlation:
    """Lag-1 autocorrelation of the point scores around their segments' means.

    Scores (ranks) keep outliers from dominating it. Removing a mean per segment biases
    the estimate down by about (1 + 3 rho) per segment length (Marriott & Pope), which
    is undone here.
    """
    n = len(series)
    scan = series.scan(0, n)
    if scan is None:
        return _Correlation(0.0)
    energy, lagged = residual_sums(scan.centred, splits)
    if energy == 0.0:
        return _Correlation(0.0)
    r1 = lagged / energy
    segments = (len(splits) + 1) / n
    # Not clipped at 0: the p-values average over the estimate's error, which is only
    # symmetric if the estimate is left where it falls.
    rho = min(max((r1 + segments) / (1.0 - 3.0 * segments), -_MAX_RHO), _MAX_RHO)
    # Bartlett's standard error of a lag-1 autocorrelation of AR(1) noise.
    return _Correlation(rho, math.sqrt((1.0 - rho * rho) / n))


def _point_variances(
    ranks: NDArray[np.float64], offsets: NDArray[np.intp], counts: NDArray[np.intp], means: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Variance of each point's mean rank under no change, by a random-effects model.

    A sample is its run's offset plus its own noise: variance tau^2 between points plus
    sigma^2 within, so a mean of r samples varies by tau^2 + sigma^2 / r. sigma^2 is the
    pooled spread of ranks within points; tau^2 what is left of the ranks' total spread
    (between-run noise, correlated noise and any shift all land there, which only makes
    the points' weights more equal).
    """
    spread = np.add.reduceat(ranks**2, offsets) - counts * means**2
    within = float(np.sum(spread)) / float(np.sum(counts - 1))
    between = max(float(np.var(ranks)) - within, 0.0)
    # Ties can leave no spread within points; the points then differ only between.
    return between + max(within, 1e-12) / counts


def _difference_correlation(series: _Series) -> float:
    """A lower bound of the lag-1 autocorrelation (two standard errors below its estimate
    from lag-1 and lag-2 differences), at least 0.

    For AR(1) noise E(x_t - x_t-2)^2 / E(x_t - x_t-1)^2 = 1 + rho, and a step moves
    only the few differences across it. The estimate's spread, about 2 / sqrt(n) on
    AR(1) noise up to rho 0.85, was measured (bench/changepoint_calibration.py).
    """
    n = len(series)
    scan = series.scan(0, n)
    if scan is None:
        return 0.0
    lag1, lag2 = difference_sums(scan.centred)
    lag1 /= n - 1
    lag2 /= n - 2
    if lag1 == 0.0:
        return 0.0
    return min(max(lag2 / lag1 - 1.0 - 4.0 / math.sqrt(n), 0.0), _MAX_RHO)


def _common_count(starts: NDArray[np.intp]) -> int:
    """The number of samples of every point whose samples start at `starts` (one extra
    at the end), or 0 if they differ."""
    counts = np.diff(starts)
    return int(counts[0]) if counts.min() == counts.max() else 0


@dataclass(frozen=True)
class _Correlation:
    """The noise's lag-1 autocorrelation, as estimated, and the standard error of that."""

    rho: float
    se: float = 0.0

    def factors(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Long-run variance factors at Gauss-Hermite nodes of rho's sampling error, and weights.

        A p-value averaged over them accounts for rho being estimated, as a t-test's
        does for the variance: a factor plugged in would be too small about half the
        time, and the tail probability is convex in it (at the default level a 10%
        too small factor doubles the false alarms).
        """
        nodes, weights = (_RHO_NODES, _RHO_WEIGHTS) if self.se else _KNOWN
        # (np.clip's Python wrapper took longer than the arithmetic.)
        rho = np.minimum(np.maximum(self.rho + self.se * nodes, -_MAX_RHO), _MAX_RHO)
        return (1.0 + rho) / (1.0 - rho), weights


class _Test(NamedTuple):  # (a tuple: made and re-made many times a series, at a third of a dataclass's cost)
    split: int  # index into the series of the first point after the best split
    log_p: float
    significant: bool
    z: float = 0.0  # the largest |z| over the splits, after the long-run variance factor
    threshold: float = math.nan  # the |z| the level asks for (when significant)


class _Tester:
    """Tests segments of one series for a change, at one level and noise correlation."""

    def __init__(self, series: _Series, log_alpha: float, correlation: _Correlation,
                 rng: Callable[[], np.random.Generator]):
        self.series = series
        self.log_alpha = log_alpha
        # Long-run variance of AR(1) noise over its variance: sums of n correlated
        # points vary (1 + rho) / (1 - rho) times as much as sums of independent ones.
        self.factor = (1.0 + correlation.rho) / (1.0 - correlation.rho)
        factors, weights = correlation.factors()
        # The magnitude's interval takes the factor expected over rho's error.
        self.expected_factor = float(np.dot(factors, weights))
        # A statistic divided by the estimated factor is too large by sqrt(true / estimated);
        # averaging its tail over the factors rho's sampling error could have given
        # instead (a statistic times sqrt(factor / estimated) each) calibrates it.
        self.inflation = np.sqrt(factors / self.factor)
        self.log_weights = np.log(weights)
        # (As Python floats for the critical value's Newton slope.)
        self._inflations: list[float] = self.inflation.tolist()
        # What the bounds and the tail sums in C read (cp_decide, cp_log_tail): the level,
        # the root of the factor, the smallest inflation, then the nodes'.
        self._constants = doubles([log_alpha, math.sqrt(self.factor), min(self._inflations), len(weights),
                                   *self._inflations, *weights.tolist(), *self.log_weights.tolist()])
        self._tails = doubles([0.0] * len(weights))  # log(weight * p) at each node, from cp_log_tail
        self.rng = rng
        # Refinement re-tests the same intervals round after round.
        self._done: dict[tuple[int, int], _Test] = {}
        self._last_critical = math.nan

    def test(self, a: int, b: int) -> _Test:
        if (a, b) not in self._done:
            self._done[a, b] = self._test(a, b)
        return self._done[a, b]

    def _test(self, a: int, b: int) -> _Test:
        scan = self.series.scan(a, b) if b - a >= 2 * MIN_SEGMENT else None
        if scan is None:  # too short, or all tied: nothing can have changed
            return _Test(split=a, log_p=0.0, significant=False)
        z = scan.z / math.sqrt(self.factor)
        # Where a bound decides the test, its p-value is worked out only if it is reported
        # or refinement needs it (exact()): most segments without a change are far above
        # the level (|z| of 1 to 3), most with a large one far below it.
        decided = decide(z, self._constants, _split_layout(b - a).constants)
        if decided:
            return _Test(split=a + scan.best, log_p=math.nan, significant=decided > 0, z=z)
        log_p = self._log_tail(z, scan.tail)
        threshold = math.nan
        if len(scan.scores) <= _PERMUTATION_MAX_POINTS and log_p >= self.log_alpha:
            log_p, threshold = self._log_permutation_p(scan.centred, z)
        return _Test(split=a + scan.best, log_p=log_p, significant=log_p < self.log_alpha, z=z,
                     threshold=threshold)

    def exact(self, a: int, b: int) -> _Test:
        """The test of points a..b-1 with its p-value worked out even where a bound
        showed it to be above the level."""
        test = self.test(a, b)
        if math.isnan(test.log_p):
            scan = self.series.scan(a, b)
            assert scan is not None  # a test without a scan has log p 0
            test = self._done[a, b] = test._replace(log_p=self._log_tail(test.z, scan.tail))
        return test

    def _tail_bound(self, m: int) -> float:
        """A |z| (after the factor) beyond which the tail approximation's p-value of a
        segment of m points is below the level (inf if none is known; cp_tail_bound)."""
        return tail_bound(self._constants, _split_layout(m).constants)

    def critical_bound(self, a: int, b: int, test: _Test) -> float:
        """At least the |z| that test's level asks for (`critical`), without solving for it."""
        if not math.isnan(test.threshold):
            return test.threshold
        # The solved value may overshoot the crossing by its tolerance.
        return self._tail_bound(b - a) + 10.0 * _CRITICAL_XTOL

    def _log_tail(self, z: float, terms: _TailTerms) -> float:
        """log p of the largest |z| (after the factor) by the tail approximation, averaged over rho's error."""
        return self._weighted_tails(z, terms)[1]

    def _weighted_tails(self, z: float, terms: _TailTerms) -> tuple[list[float], float]:
        """log(weight * p) at each node of rho's error, and log p: a statistic divided by
        the factor of the node's rho is z * inflation there, and the same splits can reach
        it (cp_log_tail)."""
        log_p = log_tail(z, self._constants, terms.scales, terms.weights, terms.reach, self._tails)
        return self._tails[:], log_p

    def critical(self, a: int, b: int, test: _Test) -> _Test:
        """The significant `test` of points a..b-1 with the |z| its level asks for.

        The permutation test kept its own; for the tail approximation it is solved for
        here, only for the tests that are reported: by Newton's method on log p against
        z^2, whose slope is about 1/(2 z^2) - c^2/2 at a node with inflation c (the sum's
        own change is slow), kept inside the bracket that each evaluation narrows.
        """
        if not math.isnan(test.threshold):
            return test
        scan = self.series.scan(a, b)
        assert scan is not None  # the test was significant
        low, high = 0.0, test.z  # log p is 0 below 1 and below the level at test.z
        # Segments of similar length have similar critical values: the last one is a
        # start that Newton takes from in one or two steps.
        z = self._last_critical if 1.0 < self._last_critical < test.z else test.z
        for step in count():
            tails, log_p = self._weighted_tails(z, scan.tail)
            if log_p < self.log_alpha:
                high = z
            else:
                low = z
            # In z^2 log p is nearly linear (the normal density's exponent), which Newton
            # needs to get from a statistic far above the level in few steps.
            slope = sum(math.exp(t - log_p) * (0.5 / (z * z) - 0.5 * c * c)
                        for t, c in zip(tails, self._inflations, strict=True) if z * c >= 1.0)
            squared = z * z - (log_p - self.log_alpha) / slope if slope < 0.0 else -1.0
            # log p jumps where a split stops being reachable, and may jump over the level:
            # Newton then goes to and fro across the jump, which bisection closes in on.
            newton = step < _NEWTON_STEPS and low**2 < squared < high**2
            following = math.sqrt(squared) if newton else (low + high) / 2.0
            if abs(following - z) < _CRITICAL_XTOL or high - low < _CRITICAL_XTOL:
                break
            z = following
        self._last_critical = following
        return test._replace(threshold=following)

    def _log_permutation_p(self, centred: NDArray[np.float64], z: float) -> tuple[float, float]:
        """Monte Carlo p-value of the maximum |z| over random orders of the scores, and
        the level's critical value among the permuted maxima (nan if not reached).

        Permuted rows are independent by construction, so their statistics need no
        long-run variance correction; the observed one has had it, once per factor of
        rho's error, and the p-values are averaged. Draws stop once the p-value is
        clearly above the level or resolved below it (Besag & Clifford).
        """
        m = len(centred)
        alpha = math.exp(self.log_alpha)
        needed = min(_PERMUTATION_MAX_DRAWS, math.ceil(_PERMUTATION_STOP_EXCEEDANCES / alpha))
        observed = z * self.inflation * (1.0 - 1e-12)
        weights = np.exp(self.log_weights)
        maxima: list[NDArray[np.float64]] = []
        drawn = 0
        exceeded = np.zeros(len(observed))
        batch = 64
        while drawn < needed and float(np.dot(weights, exceeded)) < _PERMUTATION_STOP_EXCEEDANCES:
            rows = self.rng().permuted(np.broadcast_to(centred, (batch, m)), axis=1)
            maxima.append(_scan(rows).max(axis=1))
            exceeded += np.sum(maxima[-1][:, np.newaxis] >= observed, axis=0)
            drawn += batch
            batch = min(4 * batch, needed - drawn, max(1, _PERMUTATION_BATCH_CELLS // m))
        log_p = math.log(float(np.dot(weights, (exceeded + 1) / (drawn + 1))))
        threshold = float(np.quantile(np.concatenate(maxima), 1.0 - alpha)) if drawn >= needed else math.nan
        return log_p, threshold


def _scan(centred: NDArray[np.float64]) -> NDArray[np.float64]:
    """|z| of every split k = MIN_SEGMENT..m-MIN_SEGMENT for each row of scores.

    The variance of a partial sum is its permutation variance, so a shift does not
    inflate it, and rows that are permutations of each other share it. The scores must
    not all be equal.
    """
    m = centred.shape[1]
    partial = np.cumsum(centred, axis=1)[:, MIN_SEGMENT - 1 : m - MIN_SEGMENT]
    return np.abs(partial) / (math.sqrt(float(np.mean(centred[0] ** 2))) * _split_spread(m))


@lru_cache(maxsize=1024)
def _split_spread(m: int) -> NDArray[np.float64]:
    """sqrt(k (m - k) / (m - 1)), k = MIN_SEGMENT..m-MIN_SEGMENT: a split's partial sum's
    standard deviation over the scores' under random order."""
    k = np.arange(MIN_SEGMENT, m - MIN_SEGMENT + 1, dtype=float)
    return np.sqrt(k * (m - k) / (m - 1))


def _tail_terms(
    scores: NDArray[np.float64 | np.int64], ordered: NDArray[np.float64 | np.int64] | None, spread: float
) -> _TailTerms:
    """The terms of the tail sum of a segment with these centred scores (see _TailTerms).

    A split's reach is the k most extreme scores on one side. They sum to 0, so the k
    largest on one side are the m - k smallest on the other, and a split near the far end
    has the bound of m - k. Only the _REACH_EDGE splits nearest each end are worked out,
    from a partial sort; further in, every split counts as reachable, which can only raise
    the p-value. `ordered` is the scores in ascending order where they are known (or
    only the _REACH_EDGE smallest and largest); `spread` their root mean square.
    """
    m = len(scores)
    edge = min(_REACH_EDGE, m - 1)  # no split has m points on one side
    if ordered is None:
        ordered = np.sort(scores if m <= 2 * edge else
                          np.partition(scores, [edge - 1, m - edge])[np.r_[:edge, m - edge : m]])
    layout = _split_layout(m)
    ends = np.ascontiguousarray(ordered, dtype=np.float64)  # (integers: exactly)
    return _TailTerms(layout.weights, layout.scales,
                      reach(ends, edge, spread, layout.bound_spread, (layout.near, layout.near_j),
                            (layout.far, layout.far_j), len(layout.weights)))


@dataclass(frozen=True)
class _SplitLayout:
    """What the tail terms of a segment of m points share with every segment of m points."""

    weights: NDArray[np.float64]
    scales: NDArray[np.float64]
    bound_spread: NDArray[np.float64]  # sqrt(j (m - j) / (m - 1)), j = 1.._REACH_EDGE
    near: NDArray[np.intp]  # terms of the splits k <= edge, bounded by the k most extreme
    near_j: NDArray[np.intp]  # their k - 1
    far: NDArray[np.intp]  # terms of the splits m - k <= edge, bounded by the m - k most extreme
    far_j: NDArray[np.intp]  # their m - k - 1
    # The integral's length in u (its weights' sum) and its largest scale; 0 when every
    # split is a term of its own.
    interior: float
    interior_scale: float
    total_weight: float  # of all terms
    # The last three as the bounds in C read them (cp_decide, cp_tail_bound).
    constants: Doubles = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "constants", doubles([self.interior, self.interior_scale, self.total_weight]))


@lru_cache(maxsize=1024)
def _split_layout(m: int) -> _SplitLayout:
    edge = min(_REACH_EDGE, m - 1)  # no split has m points on one side
    j = np.arange(1, edge + 1, dtype=float)
    integrated = m - 2 * edge - 1 > 2 * _QUADRATURE_NODES
    if integrated:
        k = np.concatenate((np.arange(MIN_SEGMENT, edge + 1), np.arange(m - edge, m - MIN_SEGMENT + 1)))
    else:
        k = np.arange(MIN_SEGMENT, m - MIN_SEGMENT + 1)
    near = np.flatnonzero(k <= edge)
    # Where a split is near both ends (short segments), the far end's bound is taken.
    far = np.flatnonzero(m - k <= edge)
    near = np.setdiff1d(near, far)
    weights = m / (k * (m - k.astype(float)))
    scales = np.sqrt(weights)
    if integrated:
        # Splits edge + 1 .. m - edge - 1, by the midpoint rule's integral from edge + 1/2
        # to m - edge - 1/2: the terms change by about 1/k per split there, so the error is
        # of the order 1e-6 of the sum. The integrand is even in u.
        half = math.log((m - edge - 0.5) / (edge + 0.5))
        u = half * _GL_NODES
        weights = np.concatenate((weights, 2.0 * half * _GL_WEIGHTS))
        interior = np.sqrt((2.0 + 2.0 * np.cosh(u)) / m)
        scales = np.concatenate((scales, interior))
        return _SplitLayout(weights, scales, np.sqrt(j * (m - j) / (m - 1)), near, k[near] - 1, far, m - k[far] - 1,
                            2.0 * half * float(_GL_WEIGHTS.sum()), float(interior.max()), float(weights.sum()))
    return _SplitLayout(weights, scales, np.sqrt(j * (m - j) / (m - 1)), near, k[near] - 1, far, m - k[far] - 1,
                        0.0, 0.0, float(weights.sum()))


def _describe(series: _Series, before_start: int, test: _Test, after_end: int, tester: _Tester) -> ChangePoint:
    split = test.split
    before = series.summaries[max(before_start, split - _MAGNITUDE_MAX_SIDE) : split]
    after = series.summaries[split : min(after_end, split + _MAGNITUDE_MAX_SIDE)]
    factor = tester.expected_factor
    bound = tester.critical_bound(before_start, after_end, test)

    def critical() -> float:
        return tester.critical(before_start, after_end, test).threshold

    if series.positive or (before.min() > 0 and after.min() > 0):
        # A ratio of levels: on logs the interval maps back exactly and stays asymmetric.
        shift = _selected(_hodges_lehmann(np.log(before), np.log(after), factor), test.z, bound, critical)
        change_pct, low, high = (100.0 * math.expm1(v) for v in shift)
    else:
        reference = abs(float(np.median(before)))
        scale = 100.0 / reference if reference else math.nan
        shift = _selected(_hodges_lehmann(before, after, factor), test.z, bound, critical)
        change_pct, low, high = (v * scale for v in shift)
    return ChangePoint(
        index=int(series.positions[split]),
        change_pct=change_pct,
        ci_pct=(low, high),
        strength=-test.log_p / math.log(10.0),
        p_value=math.exp(test.log_p),
    )


def _selected(
    shift: tuple[float, float, float], statistic: float, bound: float, critical: Callable[[], float]
) -> tuple[float, float, float]:
    """The shift and its interval given that the test found it: conditional on |Z| >= threshold.

    A change is recorded only when its statistic passed the level, so the changes found
    near the level are the ones noise made look larger: taken at face value they
    overstate the change and their intervals miss it too often. The statistic is
    modelled as N(mu, 1) truncated to |Z| >= threshold; the mu at which the observed
    |z| is the 2.5%, 50% and 97.5% point of that (the conditional, median-unbiased
    estimate and interval) move the Hodges–Lehmann estimate and its Moses bounds by as
    many of their standard errors. Far above the threshold nothing moves.

    The test's z is of ranks, which saturate (a 30 + 20 point split cannot pass 5.9,
    however large the step): it is the estimate's own z, estimate / standard error,
    that is truncated, at the test's threshold scaled by the ratio of the two.
    `statistic` is the test's z, `critical()` its threshold, solved for only if `bound`
    (at least the threshold) does not already show the estimate far above it.
    """
    estimate, low, high = shift
    sign = 1.0 if estimate >= 0 else -1.0
    # As a magnitude: the truncation pulls towards zero whichever way the change went.
    estimate, low, high = sign * estimate, *sorted((sign * low, sign * high))
    down, up = (estimate - low) / _CI_Z, (high - estimate) / _CI_Z
    if not down > 0.0:
        return shift
    z = estimate / down
    if z - bound * z / statistic > _UNSELECTED_MARGIN:
        return shift
    # No critical value (nan), or none below the statistic (the permuted maxima's quantile
    # leaves rho's error out): nothing to condition on.
    threshold = critical()
    if not threshold < statistic:
        return shift
    threshold *= z / statistic
    if z - threshold > _UNSELECTED_MARGIN:
        return shift
    lower, middle, upper = (_truncated_mean(z, threshold, q) for q in _SELECTED_QUANTILES)
    moved = (estimate - (z - middle) * down, estimate - (z - lower) * down, estimate + (upper - z) * up)
    if sign > 0:
        return moved
    return -moved[0], -moved[2], -moved[1]


def _truncated_mean(z: float, threshold: float, quantile: float) -> float:
    """mu such that P(Z >= z | |Z| >= threshold) = quantile for Z ~ N(mu, 1); z >= threshold."""

    def gap(mu: float) -> float:
        kept = np.logaddexp(log_ndtr(mu - threshold), log_ndtr(-threshold - mu))
        return float(log_ndtr(mu - z) - kept) - math.log(quantile)

    # The truncation only lowers mu, and by less than 40 even at the threshold itself; 10
    # above z, z is exceeded almost surely: the root is between.
    return float(brentq(gap, z - 40.0, z + 10.0))


def _hodges_lehmann(
    before: NDArray[np.float64], after: NDArray[np.float64], factor: float
) -> tuple[float, float, float]:
    """Shift estimate and its Moses interval, the U variance scaled by `factor`.

    The interval is the pair of order statistics of all after-minus-before differences
    whose ranks invert the Mann–Whitney test (Hollander & Wolfe), with the normal
    approximation of U's null distribution.
    """
    n1, n2 = len(before), len(after)
    sd = math.sqrt(factor * n1 * n2 * (n1 + n2 + 1) / 12.0)
    last = n1 * n2 - 1
    c = min(max(0, math.floor(n1 * n2 / 2.0 - _CI_Z * sd)), last // 2)
    middle = last // 2
    low, mid_low, mid_high, high = difference_quantiles(before, after, (c, middle, middle + last % 2, last - c))
    return (mid_low + mid_high) / 2.0, low, high
