"""Comparing two samples of one metric: relative change, its confidence interval, a verdict.

The method and its assumptions are written up in docs/statistics.md; in short:

- The change is the ratio of the arithmetic means. Its CI is a t interval on the log of
  that ratio, with a delta-method standard error and Welch–Satterthwaite degrees of
  freedom, mapped back with exp. It needs no resampling, is valid from n=3 per side,
  asymmetric like a ratio should be, and always contains the reported change.
- When a value is zero or negative the metric is not a positive quantity with
  multiplicative noise; the CI is then Fieller's interval on the raw values and the
  test Welch's t on their difference. `Comparison.method` says which was used.
- Runs, not repetitions, are the unit when a side has several runs: the side's mean
  varies by the spread of its run means (which holds both the between-run and the
  within-run variance), with one degree of freedom fewer than it has runs. A side of one
  run cannot show its between-run variance; ASSUMED_BETWEEN_RUN_CV_PCT is added for it
  instead of zero, and the caller says so. Interleaved pairs (`ab`) need neither.
- Four answers: `regression` / `improvement` when the t test passes at alpha and the
  change exceeds a practical floor; `no change` only when the whole interval lies
  inside ±floor (equivalence); otherwise `inconclusive`, with an estimate of how many
  more samples a side (pairs, runs) would decide it. Below MIN_SAMPLES per side the
  answer is `inconclusive`. Neutral metrics (monitors) say `changed` instead of a
  direction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

# scipy.special, not scipy.stats: the t distribution's functions are these ufuncs
# (scipy.stats.t.sf(x, df) is stdtr(df, -x), t.ppf(q, df) is stdtrit(df, q), norm.ppf
# is ndtri), and scipy.stats takes 0.85 s more to import (bench/store_scale.py).
from scipy.special import ndtri, stdtr, stdtrit

from perfline.records.metric import Direction, Metric
from perfline.stats.ranks import EXACT_MAX_N, mann_whitney_p, signed_rank_p
from perfline.stats.summary import Summary, summarize

# Below five repetitions per side no verdict is given. At five, the rank test shown beside
# the t test can itself reach p < 0.01 (its smallest two-sided p is 2/252), so a reader
# can check the t test's verdict without trusting its normality assumption; at three it
# could not go below 0.1.
MIN_SAMPLES = 5

# Modified z-score cut-off of Iglewicz and Hoaglin: |x - median| / (1.4826 * MAD) > 3.5.
OUTLIER_Z = 3.5
_MAD_TO_SIGMA = 1.4826
# When more than half the values are equal the MAD is 0; Iglewicz and Hoaglin then scale
# the mean absolute deviation instead (1.2533 = sqrt(pi/2) makes it estimate sigma).
_MEAN_AD_TO_SIGMA = 1.2533

# Tied samples with a side of at most ranks.EXACT_MAX_N values take their rank-test
# p-value from the permutation distribution (the exact tables assume no ties; above that
# size the tie-corrected normal approximation holds): exact when there are at most this
# many arrangements, else a seeded Monte Carlo draw of this size.
_PERMUTATIONS = 9999

METHOD_LOG_RATIO = "welch-log-ratio"
METHOD_PAIRED = "paired-log-ratio"
METHOD_RAW = "welch-raw-fieller"
# The same, on 20%-trimmed means of the log values (Yuen's test), chosen when outliers
# are present: see _has_outliers.
METHOD_TRIMMED = "yuen-trimmed-log-ratio"
METHOD_PAIRED_TRIMMED = "paired-trimmed-log-ratio"

# Yuen's trimming: 20% off each end is the usual compromise (Wilcox) between the mean's
# efficiency on clean data and the median's resistance; with 10% of samples at x3 it
# keeps 89% power for a 5% step at n=20 where the mean's test has 2%.
TRIM = 0.2
# The trimmed test judges only from this many values a side, and only when some value
# is this far out (modified z-score). Below ten values trimming keeps too few degrees
# of freedom to pay for itself; at z 3.5 (the marker shown to readers) a fair normal
# sample of 20 would be trimmed 13% of the time, at 5 under 1%, while a sample at x3 in
# 1% noise scores in the hundreds.
TRIM_MIN_SAMPLES = 10
TRIM_OUTLIER_Z = 5.0

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no change"
INCONCLUSIVE = "inconclusive"
CHANGED = "changed"  # a significant change of a neutral metric, which has no better side

# The run-to-run variation a side of one run cannot show (boot, memory layout, drift of
# the machine between runs), as a CV of the run mean. 1%: kernel benchmarks on a quiet
# machine vary 0.5-2% between runs taken minutes apart; on the busy VM of
# docs/statistics.md side means drifted far more (A/A one after the other: 20% false
# verdicts without it). Assuming it rather than zero costs power on one-run sides,
# which is the honest price of not knowing: `perfline ab` or several runs a side avoid it.
ASSUMED_BETWEEN_RUN_CV_PCT = 1.0


@dataclass(frozen=True)
class Comparison:
    """`other` against `base` for one metric; `dataclasses.asdict` gives plain JSON values.

    p_value is Welch's t test of equal means: on the log of the ratio of the means
    (method "welch-log-ratio"), or on their raw difference when a value is zero or
    negative (method "welch-raw-fieller"). With the log ratio, p_value < 1 - c exactly
    when the c-level interval excludes 0. p_value_rank is the two-sided Mann–Whitney U
    test, shown beside it for data the t test's assumptions may not fit; it does not
    enter the verdict. Both p-values and the interval are NaN when a side has one value.
    """

    metric: Metric
    base: Summary
    other: Summary
    # 100·(mean_other/mean_base - 1); divided by |mean_base| so that a positive change
    # always means the value went up, also for a negative base; ±inf from a zero base.
    change_pct: float
    # Confidence interval of change_pct (95% by default); (-inf, inf) when unbounded.
    ci_pct: tuple[float, float]
    p_value: float
    p_value_rank: float
    # p_value < alpha, |change_pct| > floor_pct, and at least MIN_SAMPLES per side.
    significant: bool
    # "regression" | "improvement" (significant) | "no change" (the interval inside
    # ±floor_pct) | "inconclusive"; "changed" for a significant change of a neutral metric.
    verdict: str
    # Indexes of outliers within each sample; they stay in every figure above.
    outliers_base: tuple[int, ...]
    outliers_other: tuple[int, ...]
    # METHOD_LOG_RATIO, METHOD_PAIRED or METHOD_RAW: which interval and test were used.
    method: str
    floor_pct: float = 1.0
    # When inconclusive: about how many more samples a side (pairs when paired, runs
    # when runs are the unit) would decide it either way; None when it cannot be told.
    more_samples: int | None = None
    # The unit of inference: "samples", "runs" (run means) or "pairs".
    unit: str = "samples"


@dataclass(frozen=True)
class _Estimate:
    """A t statistic's ingredients: the estimate, its standard error, Welch's df."""

    value: float
    se: float
    df: float
    count: int = 0  # units (samples, runs, pairs) of the smaller side
    floor_var: float = 0.0  # the part of se² more units cannot shrink (assumed)

    def interval(self, confidence: float) -> tuple[float, float]:
        """The interval of exp(value) - 1."""
        margin = self.t_quantile(confidence) * self.se
        return math.expm1(self.value - margin), math.expm1(self.value + margin)

    def p_value(self) -> float:
        """Two-sided p-value of "the true value is 0"."""
        if self.se == 0:
            return 1.0 if self.value == 0 else 0.0
        return float(2 * stdtr(self.df, -abs(self.value) / self.se))

    def t_quantile(self, confidence: float) -> float:
        return float(stdtrit(self.df, (1 + confidence) / 2))


def compare(
    base: Sequence[float] | NDArray[np.float64],
    other: Sequence[float] | NDArray[np.float64],
    metric: Metric,
    *,
    alpha: float = 0.01,
    floor_pct: float = 1.0,
    confidence: float = 0.95,
    seed: int = 0,
    paired: bool = False,
    base_runs: Sequence[int] | NDArray[np.int64] | None = None,
    other_runs: Sequence[int] | NDArray[np.int64] | None = None,
    between_run_cv_pct: float = ASSUMED_BETWEEN_RUN_CV_PCT,
    between_run_df: float = 0.0,
) -> Comparison:
    """Compare `other` with `base`; `seed` fixes the rank test's permutation draw.

    `paired=True` says base[i] and other[i] were measured back to back (interleaved
    A/B): the interval then uses the spread of the pairs' differences, from which drift
    of the machine shared by both members of a pair cancels, and the rank test is
    Wilcoxon's signed-rank test on the pairs' log ratios.

    `base_runs` and `other_runs` name the run of each value: a side of several runs is
    judged by its run means, a side of one run with ASSUMED_BETWEEN_RUN_CV_PCT added
    (module docstring), or `between_run_cv_pct` when the caller knows better (a tracker
    learns it from a series' history). Without them every value counts as its own run's.
    `between_run_df` > 0 says `between_run_cv_pct` was learned, with that many degrees of
    freedom: a side of several runs then pools the spread of its own run means with it
    (_moderated), instead of judging by a few runs' spread alone.
    """
    if not 0 < alpha < 1 or not 0 < confidence < 1:
        raise ValueError("alpha and confidence must be between 0 and 1")
    b, o = _finite(base, "base"), _finite(other, "other")
    base_summary, other_summary = summarize(b), summarize(o)
    # The log form models positive quantities with noise proportional to their level;
    # a zero or negative value says the metric is not one (e.g. iowait %, fault counts).
    method = METHOD_LOG_RATIO if (b > 0).all() and (o > 0).all() else METHOD_RAW
    if paired and method == METHOD_LOG_RATIO and len(b) == len(o):
        method = METHOD_PAIRED
    estimate: _Estimate | None = None
    unit = "pairs" if method == METHOD_PAIRED else "samples"
    change_pct = _change_pct(base_summary.mean, other_summary.mean)
    if min(len(b), len(o)) < 2:
        ci_pct, p_value, p_rank = (math.nan, math.nan), math.nan, math.nan
    elif np.ptp(np.concatenate([b, o])) == 0:
        # Every value the same on both sides: exactly no change, whatever the method.
        ci_pct, p_value, p_rank = (0.0, 0.0), 1.0, 1.0
    else:
        if method == METHOD_RAW:
            ci = _fieller(b, o, confidence)
            p_value = _difference(b, o).p_value()
        else:
            trimmed = min(len(b), len(o)) >= TRIM_MIN_SAMPLES and _has_outliers(b, o, paired=method == METHOD_PAIRED)
            if method == METHOD_PAIRED:
                estimate = _paired_log_ratio(b, o, trimmed)
                method = METHOD_PAIRED_TRIMMED if trimmed else method
            else:
                base_side, other_side = (_side(b, base_runs, trimmed, between_run_cv_pct, between_run_df),
                                         _side(o, other_runs, trimmed, between_run_cv_pct, between_run_df))
                estimate = _log_ratio(base_side, other_side)
                method = METHOD_TRIMMED if trimmed else method
                if "runs" in (base_side.unit, other_side.unit):
                    unit = "runs"
            if trimmed:
                # The change is then the ratio of the trimmed levels, so that the
                # interval and the test are about the number shown.
                change_pct = 100 * math.expm1(estimate.value)
            ci = estimate.interval(confidence)
            p_value = estimate.p_value()
        ci_pct = (100 * ci[0], 100 * ci[1])
        paired_rank = method in (METHOD_PAIRED, METHOD_PAIRED_TRIMMED)
        p_rank = _signed_rank_p_value(b, o) if paired_rank else _rank_p_value(b, o, seed)
    enough = min(len(b), len(o)) >= MIN_SAMPLES
    significant = enough and p_value < alpha and abs(change_pct) > floor_pct
    verdict = verdict_of(metric.direction, change_pct, ci_pct, significant, enough, floor_pct)
    more = None
    if verdict == INCONCLUSIVE:
        more = _more_samples(estimate, change_pct, floor_pct, alpha, min(len(b), len(o)))
    return Comparison(
        metric=metric,
        base=base_summary,
        other=other_summary,
        change_pct=change_pct,
        ci_pct=ci_pct,
        p_value=p_value,
        p_value_rank=p_rank,
        significant=significant,
        verdict=verdict,
        outliers_base=outlier_indexes(b),
        outliers_other=outlier_indexes(o),
        method=method,
        floor_pct=floor_pct,
        more_samples=more,
        unit=unit,
    )


def rejudged(comparison: Comparison, passes: bool) -> Comparison:
    """The comparison with its test decided by the caller (a multiplicity rule across a
    table): significant only if `passes` too, and the verdict to match."""
    significant = passes and comparison.significant
    if significant == comparison.significant:
        return comparison
    enough = min(comparison.base.n, comparison.other.n) >= MIN_SAMPLES
    verdict = verdict_of(comparison.metric.direction, comparison.change_pct, comparison.ci_pct, significant, enough,
                       comparison.floor_pct)
    return replace(comparison, significant=significant, verdict=verdict)


def mean_ci_halfwidth_pct(values: Sequence[float], confidence: float = 0.95) -> float:
    """Half-width of the t confidence interval of the mean, in % of the mean.

    The adaptive run count stops once this is at most the precision asked for. It is
    the per-side term of the comparison's interval, so precision p per side gives a
    change interval of about ±p·√2. Infinite below two values or for a zero mean.
    """
    data = np.asarray(values, dtype=float)
    if len(data) < 2 or data.mean() == 0:
        return math.inf
    t = stdtrit(len(data) - 1, (1 + confidence) / 2)
    return float(100 * t * math.sqrt(_relative_variance_of_mean(data)))


def detectable_change_pct(
    cv_pct: float, n: int, alpha: float = 0.01, power: float = 0.9
) -> float:
    """Smallest increase (in %) the comparison's t test finds with probability `power`.

    Assumes n values per side with the same coefficient of variation `cv_pct` (noise
    proportional to the level). Uses the noncentral t, which matters at small n. The
    verdict also needs the change to exceed the practical floor; that is not included.
    Infinite below MIN_SAMPLES, where no verdict is given.
    """
    if n < MIN_SAMPLES:
        return math.inf
    if cv_pct <= 0:
        return 0.0
    from scipy import optimize, stats  # 0.85 s to import: only the calibration needs it

    se = cv_pct / 100 * math.sqrt(2 / n)
    df = 2 * (n - 1)
    t_crit = stdtrit(df, 1 - alpha / 2)

    # The two-sided test's other tail (a significant change of the wrong sign) adds
    # under 1e-7 at the powers asked for; leaving it out also avoids scipy's NaNs there.
    def shortfall(log_change: float) -> float:
        return float(stats.nct.sf(t_crit, df, log_change / se)) - power

    # Power grows with the change; (t_crit + 10) standard errors is beyond any power < 1.
    log_change = optimize.brentq(shortfall, 0.0, (t_crit + 10) * se)
    return 100 * math.expm1(log_change)


def outlier_indexes(values: Sequence[float] | NDArray[np.float64], z: float = OUTLIER_Z) -> tuple[int, ...]:
    """Indexes of values whose modified z-score exceeds `z`, 3.5 by default (Iglewicz–Hoaglin).

    Robust: the median and MAD are not pulled by the outliers they are meant to find.
    Outliers are reported for the reader, never removed from the statistics.
    """
    data = np.asarray(values, dtype=float)
    deviation = np.abs(data - np.median(data))
    scale = _MAD_TO_SIGMA * np.median(deviation)
    if scale == 0:
        scale = _MEAN_AD_TO_SIGMA * deviation.mean()
    if scale == 0:
        return ()
    return tuple(int(i) for i in np.flatnonzero(deviation > z * scale))


def _finite(values: Sequence[float] | NDArray[np.float64], side: str) -> NDArray[np.float64]:
    data = np.asarray(values, dtype=float)
    if not np.isfinite(data).all():
        raise ValueError(f"{side} sample has a value that is not a finite number")
    return data


@dataclass(frozen=True)
class _Side:
    """One side's log level: its variance (relative, delta method), degrees of freedom,
    how many units it has, and what a unit is."""

    log_level: float
    relvar: float
    df: float
    count: int
    unit: str
    assumed: float = 0.0  # the part of relvar that is assumed, not measured


def _side(data: NDArray[np.float64], runs: Sequence[int] | NDArray[np.int64] | None, trimmed: bool = False,
          between_run_cv_pct: float = ASSUMED_BETWEEN_RUN_CV_PCT, between_run_df: float = 0.0) -> _Side:
    """Runs as the unit: several runs by their means (their spread pooled with a learned
    between-run variation, _moderated), one run with the assumed or learned between-run
    variance added; without run labels, the values as independent. `trimmed` takes
    20%-trimmed means of the log values (Yuen) for every mean."""
    if runs is None:
        level, relvar, df = _trimmed_log_mean(data) if trimmed else _log_mean(data)
        return _Side(level, relvar, df, len(data), "samples")
    labels = np.asarray(runs)
    if len(labels) != len(data):
        raise ValueError("one run label per value")
    # Each value's run as 0..k-1: the run means in one pass (a side may hold thousands of runs).
    _, run_of = np.unique(labels, return_inverse=True)
    count = int(run_of.max()) + 1 if len(run_of) else 0
    if count >= 2:
        if trimmed:
            per_run = [_trimmed_log_mean(data[run_of == k]) for k in range(count)]
            levels = np.array([run_level for run_level, _, _ in per_run])
            level, spread = float(levels.mean()), float(levels.var(ddof=1))
            # Each run's own sampling variance (a run of one value has none to give).
            of_mean = np.array([variance for _, variance, run_df in per_run if run_df > 0])
        else:
            # The log of the side's mean (so the interval holds change_pct), its
            # variance from the spread of the run means.
            sizes = np.bincount(run_of)
            means = np.bincount(run_of, weights=data) / sizes
            level = math.log(float(data.mean()))
            spread = float(means.var(ddof=1) / data.mean() ** 2)
            several = sizes >= 2
            squares = np.bincount(run_of, weights=(data - means[run_of]) ** 2)[several]
            of_mean = squares / (sizes[several] - 1) / sizes[several] / means[several] ** 2
        df = count - 1.0
        if between_run_df > 0:
            expected = (between_run_cv_pct / 100) ** 2 + (float(of_mean.mean()) if len(of_mean) else 0.0)
            spread, df = _moderated(spread, df, expected, between_run_df)
        return _Side(level, spread / count, df, count, "runs")
    level, within, within_df = _trimmed_log_mean(data) if trimmed else _log_mean(data)
    assumed = (between_run_cv_pct / 100) ** 2
    # Satterthwaite: only the measured part carries the uncertainty of an estimate.
    df = within_df * ((within + assumed) / within) ** 2 if within > 0 else math.inf
    return _Side(level, within + assumed, df, len(data), "samples", assumed)


def _moderated(spread: float, df: float, expected: float, expected_df: float) -> tuple[float, float]:
    """A few runs' spread (variance of one run's level, `df` degrees of freedom) pooled
    with the variance the series' history leads one to expect (`expected`, learned with
    `expected_df`): their df-weighted mean, with both dfs (Smyth's moderated t, limma).
    Three runs a side give 2 degrees of freedom: judged alone, an obvious step between
    two windows of a tracker's series stays inconclusive (Welch at ~2 df needs t ≈ 7 for
    p 0.01); the history has seen the same machine's run-to-run variation many times.
    A window noisier than the history expects still shows, in its own spread."""
    total = df + expected_df
    return (df * spread + expected_df * expected) / total, total


def _log_mean(data: NDArray[np.float64]) -> tuple[float, float, float]:
    """log of the mean, its delta-method variance, and its degrees of freedom. A run of
    one value has no variance of its own (0, and the run means carry it)."""
    if len(data) < 2:
        return math.log(float(data.mean())), 0.0, 0.0
    return math.log(float(data.mean())), _relative_variance_of_mean(data), len(data) - 1.0


def _trimmed_log_mean(data: NDArray[np.float64]) -> tuple[float, float, float]:
    """20%-trimmed mean of the log values, its variance and degrees of freedom."""
    return _trimmed_mean(np.sort(np.log(data)), TRIM)


def _trimmed_mean(ordered: NDArray[np.float64], trim: float) -> tuple[float, float, float]:
    """The mean of sorted values without floor(trim·n) at each end, its variance from the
    winsorized variance (Yuen: (n-1)·s_w² / (h(h-1)), h values kept) and h - 1 degrees
    of freedom; at trim 0 the mean, s²/n and n - 1."""
    n = len(ordered)
    g = math.floor(trim * n)
    h = n - 2 * g
    if h < 2:
        return float(np.median(ordered)), 0.0, 0.0
    winsorized = np.clip(ordered, ordered[g], ordered[n - g - 1]) if g else ordered
    variance = float(winsorized.var(ddof=1)) * (n - 1) / (h * (h - 1))
    return float(ordered[g : n - g].mean()), variance, h - 1.0


def _has_outliers(b: NDArray[np.float64], o: NDArray[np.float64], *, paired: bool) -> bool:
    """Whether the trimmed test should judge: some log value is an outlier (modified
    z-score) among both sides pooled, each centred on its own median so that a shift
    between them is not taken for outliers; for pairs, among the pairs' log ratios.
    The choice depends only on the pooled shapes, not on which side a value came from,
    so under no change it does not favour either test's false alarms."""
    if paired:
        return bool(outlier_indexes(np.log(o / b), TRIM_OUTLIER_Z))
    lb, lo = np.log(b), np.log(o)
    return bool(outlier_indexes(np.concatenate([lb - np.median(lb), lo - np.median(lo)]), TRIM_OUTLIER_Z))


def _relative_variance_of_mean(data: NDArray[np.float64]) -> float:
    """Var(mean)/mean², the delta-method variance of log(mean)."""
    return float(data.var(ddof=1) / len(data) / data.mean() ** 2)


def _satterthwaite_df(*parts: tuple[float, float]) -> float | None:
    """Welch–Satterthwaite degrees of freedom of a sum of variances, each (variance, its
    degrees of freedom); one with infinite degrees of freedom (known, not estimated) adds
    its variance only. None when no part has any estimated spread."""
    estimated = sum(v**2 / df for v, df in parts if v > 0 and math.isfinite(df))
    return sum(v for v, _ in parts) ** 2 / estimated if estimated > 0 else None


def _welch_df(var_b: float, n_b: int, var_o: float, n_o: int) -> float:
    """Welch–Satterthwaite degrees of freedom from the variances of the two means."""
    total = var_b + var_o
    if total == 0:
        # No spread at all: the t statistic is 0 or infinite, any df gives the same p.
        return float(n_b + n_o - 2)
    return total**2 / (var_b**2 / (n_b - 1) + var_o**2 / (n_o - 1))


def _log_ratio(b: _Side, o: _Side) -> _Estimate:
    """log(mean_o / mean_b) with its delta-method standard error and the
    Welch–Satterthwaite degrees of freedom of the two sides' variances."""
    df = _satterthwaite_df((b.relvar, b.df), (o.relvar, o.df))
    return _Estimate(
        value=o.log_level - b.log_level,
        se=math.sqrt(b.relvar + o.relvar),
        df=float(b.count + o.count - 2) if df is None else df,
        count=min(b.count, o.count),
        floor_var=b.assumed + o.assumed,
    )


def _paired_log_ratio(b: NDArray[np.float64], o: NDArray[np.float64], trimmed: bool = False) -> _Estimate:
    """log(mean_o / mean_b) for pairs measured back to back.

    The delta-method variance of the log ratio is Var(o_i/mean_o - b_i/mean_b)/n when the
    pairs may be correlated: a slow phase of the machine that slows both members of a
    pair adds to both terms and cancels in their difference. Same estimand as the
    unpaired form (the ratio of the arithmetic means), n - 1 degrees of freedom.
    `trimmed`: the 20%-trimmed mean of the pairs' log ratios instead (Tukey–McLaughlin),
    which a few wild pairs cannot move.
    """
    if trimmed:
        level, variance, df = _trimmed_log_mean(o / b)
        return _Estimate(value=level, se=math.sqrt(variance), df=df, count=len(b))
    relative = o / o.mean() - b / b.mean()
    return _Estimate(
        value=math.log(o.mean() / b.mean()),
        se=float(relative.std(ddof=1) / math.sqrt(len(b))),
        df=float(len(b) - 1),
        count=len(b),
    )


def _signed_rank_p_value(b: NDArray[np.float64], o: NDArray[np.float64]) -> float:
    """Two-sided Wilcoxon signed-rank p-value of the pairs' log ratios."""
    ratios = np.log(o / b)
    if not ratios.any():
        return 1.0
    p = signed_rank_p(ratios)
    if p is not None:
        return p
    # Zeros or ties: scipy's permutation test or tie-corrected normal approximation.
    from scipy import stats  # 0.85 s to import: only `ab`'s pairs pay it, beside their runs

    return float(stats.wilcoxon(ratios, alternative="two-sided").pvalue)


def _difference(b: NDArray[np.float64], o: NDArray[np.float64]) -> _Estimate:
    """mean_o - mean_b with Welch's standard error: the classic Welch t test."""
    var_b, var_o = b.var(ddof=1) / len(b), o.var(ddof=1) / len(o)
    return _Estimate(
        value=float(o.mean() - b.mean()),
        se=math.sqrt(var_b + var_o),
        df=_welch_df(var_b, len(b), var_o, len(o)),
    )


def _fieller(
    b: NDArray[np.float64], o: NDArray[np.float64], confidence: float
) -> tuple[float, float]:
    """Fieller's interval of the change (as a fraction), for when the log form does not fit.

    The set of ratios r with (mean_o - r·mean_b)² <= t²·(var_o + r²·var_b), turned into
    changes like _change_pct does. When the base mean is not itself distinguishable from
    zero that set is unbounded, and so is the interval returned: the relative change is
    then not known at all.
    """
    mean_b, mean_o = float(b.mean()), float(o.mean())
    var_b, var_o = float(b.var(ddof=1)) / len(b), float(o.var(ddof=1)) / len(o)
    # Welch df of (mean_o - r·mean_b) at the estimated ratio r; when the base mean is 0
    # the interval is unbounded whatever the df.
    ratio = mean_o / mean_b if mean_b else 0.0
    df = _welch_df(ratio**2 * var_b, len(b), var_o, len(o))
    t2 = float(stdtrit(df, (1 + confidence) / 2)) ** 2
    # Roots of a·r² - 2·half_b·r + c = 0; a > 0 makes the discriminant non-negative
    # (up to rounding) and the set a bounded interval.
    a = mean_b**2 - t2 * var_b
    if a <= 0:
        return (-math.inf, math.inf)
    half_b = mean_o * mean_b
    c = mean_o**2 - t2 * var_o
    root = math.sqrt(max(half_b**2 - a * c, 0.0))
    low, high = (half_b - root) / a - 1, (half_b + root) / a - 1
    # Below a negative base a larger ratio is a lower value: the interval turns round.
    return (low, high) if mean_b > 0 else (-high, -low)


def _rank_p_value(b: NDArray[np.float64], o: NDArray[np.float64], seed: int) -> float:
    """Two-sided Mann–Whitney U p-value, valid with ties at small n."""
    tied = len(np.unique(np.concatenate([b, o]))) < len(b) + len(o)
    if not (tied and min(len(b), len(o)) <= EXACT_MAX_N):
        return mann_whitney_p(o, b)
    from scipy import stats  # 0.85 s to import: only small tied samples pay it

    method = stats.PermutationMethod(n_resamples=_PERMUTATIONS, random_state=seed)
    return float(stats.mannwhitneyu(o, b, alternative="two-sided", method=method).pvalue)


def _more_samples(
    estimate: _Estimate | None, change_pct: float, floor_pct: float, alpha: float, have: int
) -> int | None:
    """About how many more units a side would decide an inconclusive comparison: the
    standard error then puts the interval either beyond the floor or inside it, at the
    change seen now. None when it cannot be told (no log-ratio estimate, a change right
    at the floor, or a part of the error that more units cannot shrink)."""
    if estimate is None or estimate.count < 2 or not math.isfinite(change_pct):
        return MIN_SAMPLES - have if have < MIN_SAMPLES else None
    gap = abs(abs(estimate.value) - math.log1p(floor_pct / 100))
    needed_var = (gap / float(ndtri(1 - alpha / 2))) ** 2
    shrinkable = estimate.se**2 - estimate.floor_var
    if gap == 0 or needed_var <= estimate.floor_var or shrinkable <= 0:
        return MIN_SAMPLES - have if have < MIN_SAMPLES else None
    total = math.ceil(estimate.count * shrinkable / (needed_var - estimate.floor_var))
    return max(total - estimate.count, MIN_SAMPLES - have, 1)


def _change_pct(mean_b: float, mean_o: float) -> float:
    """100·(mean_o/mean_b - 1) for a positive base. Dividing by |mean_b| keeps the sign
    meaning "the value went up" also for a negative base, which the verdict relies on."""
    if mean_b:
        return 100 * (mean_o - mean_b) / abs(mean_b)
    # From zero any change is infinitely large in relative terms.
    return math.copysign(math.inf, mean_o) if mean_o else 0.0


def verdict_of(
    direction: Direction, change_pct: float, ci_pct: tuple[float, float], significant: bool, enough: bool,
    floor_pct: float,
) -> str:
    if not significant:
        # Equivalence: the data show the change is within the floor, not merely that it
        # was not found. An empty floor (0) can never show that.
        inside = -floor_pct < ci_pct[0] and ci_pct[1] < floor_pct
        return NO_CHANGE if enough and (inside or ci_pct == (0.0, 0.0)) else INCONCLUSIVE
    if direction is Direction.NEUTRAL:
        return CHANGED
    better = (change_pct > 0) == (direction is Direction.HIGHER)
    return IMPROVEMENT if better else REGRESSION
