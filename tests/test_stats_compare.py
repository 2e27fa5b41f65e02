"""perfline.stats.two_sample on synthetic samples of known effect (all seeded, nothing timed)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from perfline.records.metric import Direction, Metric
from perfline.stats.two_sample import (
    METHOD_LOG_RATIO,
    METHOD_RAW,
    MIN_SAMPLES,
    compare,
    detectable_change_pct,
    mean_ci_halfwidth_pct,
)

LOWER = Metric("sched-pipe.usecs_per_op", "usecs/op", Direction.LOWER)
HIGHER = Metric("tbench.throughput", "MB/s", Direction.HIGHER)
NEUTRAL = Metric("proc-stat.cs_per_sec", "1/s", Direction.NEUTRAL)

# 2000 trials give a binomial standard error of 0.5% around 95%. The band 92–98% is
# six of them wide each way: it tolerates the method's slight conservatism at small n
# (about 96%) yet fails a percentile bootstrap, which covers about 88% at n=5.
COVERAGE_TRIALS = 2000
COVERAGE_BAND = (0.92, 0.98)


def _lognormal(rng: np.random.Generator, level: float, cv: float, n: int) -> np.ndarray:
    # Multiplicative noise with the given CV and mean exactly `level`.
    sigma = math.sqrt(math.log1p(cv**2))
    return level * rng.lognormal(-(sigma**2) / 2, sigma, n)


def _covers(truth_pct: float, ci: tuple[float, float]) -> bool:
    return ci[0] <= truth_pct <= ci[1]


@pytest.mark.parametrize(
    ("noise", "n"),
    [("lognormal", 5), ("normal", 10), ("lognormal", 3)],
)
def test_ci_covers_the_true_change_about_95_percent_of_the_time(noise: str, n: int) -> None:
    rng = np.random.default_rng(1)
    truth_pct, cv = 5.0, 0.05
    covered = 0
    for _ in range(COVERAGE_TRIALS):
        if noise == "normal":
            base = rng.normal(100.0, 100.0 * cv, n)
            other = rng.normal(105.0, 105.0 * cv, n)
        else:
            base = _lognormal(rng, 100.0, cv, n)
            other = _lognormal(rng, 105.0, cv, n)
        covered += _covers(truth_pct, compare(base, other, LOWER).ci_pct)
    assert COVERAGE_BAND[0] <= covered / COVERAGE_TRIALS <= COVERAGE_BAND[1]


def test_ci_covers_with_unequal_noise_and_sizes() -> None:
    # Welch degrees of freedom: a quiet baseline against a noisy, smaller other side.
    rng = np.random.default_rng(2)
    covered = sum(
        _covers(0.0, compare(rng.normal(50, 1, 10), rng.normal(50, 8, 5), LOWER).ci_pct)
        for _ in range(COVERAGE_TRIALS)
    )
    assert COVERAGE_BAND[0] <= covered / COVERAGE_TRIALS <= COVERAGE_BAND[1]


def test_five_percent_shift_is_significant_at_n10_with_1pct_noise() -> None:
    rng = np.random.default_rng(3)
    trials = 200
    found = 0
    for _ in range(trials):
        result = compare(_lognormal(rng, 10.0, 0.01, 10), _lognormal(rng, 10.5, 0.01, 10), LOWER)
        found += result.significant and result.verdict == "regression"
    assert found / trials >= 0.95


@pytest.mark.parametrize(("n", "cv"), [(10, 0.01), (5, 0.03)])
def test_no_shift_is_rarely_significant(n: int, cv: float) -> None:
    # alpha is 1%; the floor only removes verdicts, so at most ~1% may come out.
    rng = np.random.default_rng(4)
    trials = 1000
    false = sum(
        compare(_lognormal(rng, 10.0, cv, n), _lognormal(rng, 10.0, cv, n), LOWER).significant
        for _ in range(trials)
    )
    assert false / trials <= 0.02


@pytest.mark.parametrize(
    ("metric", "factor", "verdict"),
    [
        (HIGHER, 1.1, "improvement"),
        (HIGHER, 0.9, "regression"),
        (LOWER, 1.1, "regression"),
        (LOWER, 0.9, "improvement"),
        (NEUTRAL, 1.1, "changed"),
        (NEUTRAL, 0.9, "changed"),
    ],
)
def test_direction_words(metric: Metric, factor: float, verdict: str) -> None:
    rng = np.random.default_rng(5)
    base = rng.normal(100, 1, 8)
    result = compare(base, rng.normal(100 * factor, 1, 8), metric)
    assert result.significant
    assert result.verdict == verdict
    assert (result.change_pct > 0) == (factor > 1)


def test_floor_keeps_a_tiny_real_change_from_being_called_significant() -> None:
    rng = np.random.default_rng(6)
    base, other = rng.normal(100, 0.01, 10), rng.normal(100.5, 0.01, 10)
    result = compare(base, other, LOWER)
    assert result.p_value < 1e-6
    assert result.change_pct == pytest.approx(0.5, abs=0.05)
    assert not result.significant
    assert result.verdict == "no change"
    # The caller sets the floor per metric.
    assert compare(base, other, LOWER, floor_pct=0.25).verdict == "regression"


def test_too_few_samples_gives_no_verdict_but_still_an_interval() -> None:
    base, other = [10.0, 10.1, 9.9, 10.0], [20.0, 20.1, 19.9, 20.0]
    assert MIN_SAMPLES == 5
    result = compare(base, other, LOWER)
    assert result.verdict == "inconclusive" and result.more_samples == 1
    assert not result.significant
    assert result.p_value < 0.01
    assert result.ci_pct[0] < 100 < result.ci_pct[1]
    single = compare([1.0], [2.0], LOWER)
    assert single.verdict == "inconclusive" and single.more_samples == 4
    assert math.isnan(single.p_value) and math.isnan(single.ci_pct[0])


def test_outliers_are_reported_not_dropped() -> None:
    base = [10.0, 10.1, 9.9, 10.05, 9.95, 30.0, 10.0]
    other = [10.0, 10.1, 9.9, 10.05, 9.95, 10.0, 10.02]
    result = compare(base, other, LOWER)
    assert result.outliers_base == (5,)
    assert result.outliers_other == ()
    assert result.base.max == 30.0
    assert result.base.mean == pytest.approx(sum(base) / len(base))


def test_outlier_rule_when_most_values_are_equal() -> None:
    # The MAD is 0 here; the mean absolute deviation takes over rather than every
    # differing value (or none) being flagged.
    result = compare([5, 5, 5, 5, 5, 5, 9], [5, 5, 5, 5, 5, 5, 5], NEUTRAL)
    assert result.outliers_base == (6,)
    assert result.outliers_other == ()


def test_values_at_or_below_zero_fall_back_to_raw_values() -> None:
    rng = np.random.default_rng(7)
    base = rng.normal(-10, 0.2, 8)
    other = rng.normal(-12, 0.2, 8)
    result = compare(base, other, LOWER)
    assert result.method == METHOD_RAW
    # From -10 to -12 the value went down: for lower-is-better that is better.
    assert result.change_pct == pytest.approx(-20, abs=2)
    assert result.ci_pct[0] < result.change_pct < result.ci_pct[1] < 0
    assert result.verdict == "improvement"


def test_zero_samples() -> None:
    unchanged = compare([0.0] * 5, [0.0] * 5, NEUTRAL)
    assert (unchanged.change_pct, unchanged.p_value, unchanged.verdict) == (0.0, 1.0, "no change")
    from_zero = compare([0.0] * 5, [3.0, 3.1, 2.9, 3.0, 3.05], NEUTRAL)
    assert from_zero.change_pct == math.inf
    assert from_zero.ci_pct == (-math.inf, math.inf)
    assert from_zero.verdict == "changed"
    # A base mean indistinguishable from zero leaves the relative change unknown.
    vague = compare([0, 0, 1, 0, 0], [0, 0, 0, 0, 0], NEUTRAL)
    assert vague.method == METHOD_RAW
    assert vague.ci_pct == (-math.inf, math.inf)
    assert not vague.significant


def test_positive_samples_use_the_log_ratio_and_the_ci_agrees_with_the_test() -> None:
    rng = np.random.default_rng(8)
    for _ in range(50):
        base, other = rng.normal(100, 2, 6), rng.normal(101.5, 2, 6)
        result = compare(base, other, LOWER, confidence=0.99)
        assert result.method == METHOD_LOG_RATIO  # no outliers trimmed at 6 a side
        assert result.ci_pct[0] <= result.change_pct <= result.ci_pct[1]
        assert (result.p_value < 0.01) == (result.ci_pct[0] > 0 or result.ci_pct[1] < 0)


def test_rank_test_beside_it() -> None:
    separated = compare([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], LOWER)
    # Every ranking of 5 vs 5 is equally likely under no change: 2 of 252 are this extreme.
    assert separated.p_value_rank == pytest.approx(2 / 252)
    tied = ([1, 1, 2, 2, 3], [2, 3, 3, 4, 4])
    assert compare(*tied, LOWER).p_value_rank == compare(*tied, LOWER).p_value_rank


def test_json_able() -> None:
    rng = np.random.default_rng(9)
    result = compare(rng.normal(10, 0.1, 5).tolist(), rng.normal(11, 0.1, 5).tolist(), HIGHER)
    document = json.loads(json.dumps(dataclasses.asdict(result), allow_nan=False))
    assert document["metric"]["direction"] == "higher"
    assert document["verdict"] == "improvement"
    assert len(document["ci_pct"]) == 2
    assert set(document) == {
        "metric", "base", "other", "change_pct", "ci_pct", "p_value", "p_value_rank",
        "significant", "verdict", "outliers_base", "outliers_other", "method",
        "floor_pct", "more_samples", "unit",
    }


def test_mean_ci_halfwidth_pct() -> None:
    # mean 2, stddev 1, n 3: t(0.975, 2) = 4.303; 4.303 / sqrt(3) / 2 = 124.2%.
    assert mean_ci_halfwidth_pct([1.0, 2.0, 3.0]) == pytest.approx(124.2, abs=0.1)
    assert mean_ci_halfwidth_pct([5.0]) == math.inf
    assert mean_ci_halfwidth_pct([-1.0, 1.0]) == math.inf
    rng = np.random.default_rng(10)
    quiet, noisy = rng.normal(100, 0.5, 10), rng.normal(100, 5, 10)
    assert mean_ci_halfwidth_pct(quiet) < 1 < mean_ci_halfwidth_pct(noisy)


def test_detectable_change_matches_simulated_power() -> None:
    cv_pct, n = 2.0, 10
    change = detectable_change_pct(cv_pct, n)
    rng = np.random.default_rng(11)
    trials = 1000
    found = sum(
        compare(
            _lognormal(rng, 10.0, cv_pct / 100, n),
            _lognormal(rng, 10.0 * (1 + change / 100), cv_pct / 100, n),
            LOWER,
            floor_pct=0.0,
        ).significant
        for _ in range(trials)
    )
    # Asked for 90% power; 1000 trials have a standard error near 1%.
    assert 0.86 <= found / trials <= 0.94


def test_detectable_change_shape() -> None:
    assert detectable_change_pct(2.0, 20) < detectable_change_pct(2.0, 10)
    assert detectable_change_pct(1.0, 10) < detectable_change_pct(2.0, 10)
    assert detectable_change_pct(2.0, MIN_SAMPLES - 1) == math.inf
    assert detectable_change_pct(0.0, 10) == 0.0


def test_paired_comparison_cancels_shared_drift() -> None:
    """Interleaved pairs on a drifting machine: the paired interval is much narrower,
    still covers the true 3% change, and calls it significant where unpaired cannot."""
    rng = np.random.default_rng(7)
    covered = found_paired = found_unpaired = 0
    trials = 400
    for _ in range(trials):
        drift = 1 + 0.2 * rng.standard_normal(10)  # 20% swings shared by each pair
        base = 100 * drift * (1 + 0.005 * rng.standard_normal(10))
        other = 103 * drift * (1 + 0.005 * rng.standard_normal(10))
        paired = compare(base, other, LOWER, paired=True)
        unpaired = compare(base, other, LOWER)
        assert paired.method in ("paired-log-ratio", "paired-trimmed-log-ratio")
        # Given the drifts, the ratio of the expected means is exactly 1.03.
        covered += paired.ci_pct[0] <= 3.0 <= paired.ci_pct[1]
        found_paired += paired.significant
        found_unpaired += unpaired.significant
    assert found_paired >= 0.95 * trials
    assert found_unpaired <= 0.2 * trials
    assert covered >= 0.9 * trials


def test_paired_needs_equal_lengths_and_positive_values() -> None:
    assert compare([1.0, 2, 3, 4, 5], [1.0, 2, 3, 4], LOWER, paired=True).method == "welch-log-ratio"
    assert compare([0.0, 2, 3, 4, 5], [1.0, 2, 3, 4, 6], LOWER, paired=True).method == "welch-raw-fieller"


def test_rank_p_value_is_scipys_mannwhitneyu() -> None:
    """stats.ranks stands in for scipy.stats.mannwhitneyu (0.85 s to import): the same
    two-sided p-values, exact and by the normal approximation with ties."""
    from scipy import stats

    from perfline.stats.ranks import mann_whitney_p

    rng = np.random.default_rng(17)
    checked = 0
    for trial in range(600):
        n1, n2 = int(rng.integers(1, 14)), int(rng.integers(1, 14))
        if trial % 5 == 0:
            n2 = int(rng.integers(9, 300))
        x, y = rng.normal(0, 1, n1), rng.normal(rng.normal(0, 1), 1, n2)
        if trial % 3:  # ties, few or many
            x, y = np.round(x, trial % 3 - 1), np.round(y, trial % 3 - 1)
        tied = len(np.unique(np.concatenate([x, y]))) < n1 + n2
        if tied and min(n1, n2) <= 8:
            continue  # the permutation distribution: scipy.stats itself (two_sample)
        expected = stats.mannwhitneyu(x, y, alternative="two-sided").pvalue
        assert mann_whitney_p(x, y) == pytest.approx(1.0 if math.isnan(expected) else expected, abs=1e-9)
        checked += 1
    assert checked > 300
    # One side small and untied, the other large: exact, beyond int64's counts.
    x, y = rng.normal(0, 1, 8), rng.normal(0.3, 1, 1500)
    assert mann_whitney_p(x, y) == pytest.approx(stats.mannwhitneyu(x, y).pvalue, abs=1e-9)


def test_signed_rank_p_value_is_scipys_wilcoxon() -> None:
    """stats.ranks' signed-rank test stands in for scipy.stats.wilcoxon where there are
    no zeros and no ties: the same two-sided p-values, exact up to 50 differences and by
    the normal approximation beyond; with a zero or a tie it declines (scipy decides)."""
    from scipy import stats

    from perfline.stats.ranks import signed_rank_p

    rng = np.random.default_rng(23)
    for trial in range(400):
        n = int(rng.integers(1, 51)) if trial % 4 else int(rng.integers(51, 400))
        d = rng.normal(rng.normal(0, 0.5), 1, n)
        expected = stats.wilcoxon(d, alternative="two-sided").pvalue
        assert signed_rank_p(d) == pytest.approx(expected, abs=1e-9, rel=1e-9)
    assert signed_rank_p(np.array([0.5, -0.5, 1.0])) is None
    assert signed_rank_p(np.array([0.0, 0.5, 1.0])) is None
    # All of one sign: the smallest exact p-value, 2 / 2^n.
    assert signed_rank_p(np.arange(1.0, 11)) == pytest.approx(2 / 2**10)


def test_t_functions_are_scipy_stats_t() -> None:
    """two_sample's t p-values and quantiles come from scipy.special's ufuncs, which are
    what scipy.stats.t calls; also at infinite degrees of freedom."""
    from scipy import stats
    from scipy.special import stdtr, stdtrit

    rng = np.random.default_rng(3)
    for df in [*rng.uniform(1, 200, 50), math.inf]:
        x, q = float(rng.uniform(0, 6)), float(rng.uniform(0.5, 0.9999))
        assert 2 * stdtr(df, -x) == pytest.approx(2 * stats.t.sf(x, df), rel=1e-12, abs=1e-300)
        assert stdtrit(df, q) == pytest.approx(stats.t.ppf(q, df), rel=1e-12)


def test_a_learned_between_run_variation_is_pooled_with_a_few_runs_spread_at_alpha() -> None:
    """Three runs a side (5 repetitions each, 2% within a run, 0.5% between runs), as a
    tracker's pooled windows have them. Judged by their own spread alone (2 degrees of
    freedom a side) a 3% step was found in 21% of 3000 comparisons; pooled with the
    between-run variation a long history learned (16 df, here the true one) in 78%, and
    A/A pairs at 0.87%, within alpha."""
    rng = np.random.default_rng(7)

    def runs(level: float, first: int) -> tuple[list[float], list[int]]:
        values: list[float] = []
        labels: list[int] = []
        for run in range(3):
            values += list(level * rng.lognormal(0, 0.005) * rng.lognormal(0, 0.02, 5))
            labels += [first + run] * 5
        return values, labels

    def significant(step: float, df: float) -> int:
        hits = 0
        for _ in range(1000):
            (b, b_runs), (o, o_runs) = runs(1.0, 0), runs(1.0 + step, 10)
            c = compare(b, o, LOWER, floor_pct=0.0, base_runs=b_runs, other_runs=o_runs,
                        between_run_cv_pct=0.5, between_run_df=df)
            hits += c.p_value < 0.01
        return hits

    # Binomial margins (1000 each): A/A ~9 expected, a pooled-in variation that were
    # taken as known exactly or weighted wrong would show here; power 780 against 210.
    assert significant(0.0, 16.0) <= 20
    assert significant(0.03, 16.0) >= 650
    assert significant(0.03, 0.0) <= 350
