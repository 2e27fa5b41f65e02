"""One estimate of a level's noise from its neighbours (stats.neighbour_noise) serves the
tracker's learned between-run noise (track.learned_noise) and a count's history noise
(stats.counted.history_noise): on the same series they agree, and each is right about
what it measures. Seeded draws; margins several standard errors of the median wide."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfline.stats.counted import history_noise
from perfline.stats.neighbour_noise import level_variance
from perfline.track.learned_noise import WINDOW, learn_noise


def count_series() -> list[list[float]]:
    """WINDOW tested commits of an instruction count, 3 repetitions each that repeat
    exactly: two real steps (+0.5% at 8, -0.3% at 20) and four commits a few
    instructions off (a timer read): 10 of the 29 neighbour differences are not 0."""
    out = []
    for i in range(WINDOW):
        level = 1e8 * (1.005 if i >= 8 else 1.0) * (0.997 if i >= 20 else 1.0)
        level += {3: 12.0, 13: -7.0, 17: 30.0, 25: 5.0}.get(i, 0.0)
        out.append([level] * 3)
    return out


def test_a_count_that_mostly_repeats_has_no_noise_by_either_caller() -> None:
    points = count_series()
    learned = learn_noise(points, 1.0)
    assert learned.learned and learned.between_pct == 0.0
    assert history_noise([float(np.mean(p)) for p in points]) == 0.0
    # The code changes at a third of the commits (0.1-1% each), the count repeats exactly
    # between: still 0. rustc-perf's Q3 + 3·IQR cut (the tracker's rule before) keeps
    # every step once over a quarter of the differences are not 0: it gave 0.26% here.
    changes = dict(zip(range(2, WINDOW, 3), np.linspace(0.001, 0.01, 10), strict=False))
    levels = 1e8 * np.cumprod([1 + changes.get(i, 0.0) for i in range(WINDOW)])
    assert learn_noise([[v] * 3 for v in levels], 1.0).between_pct == 0.0
    assert history_noise(list(levels)) == 0.0


def test_a_noisy_count_with_steps_gets_the_same_noise_from_both() -> None:
    """A count whose counter also sees other work (0.3% a run, the repetitions of a run
    equal) with two real 5% steps: both callers measure 0.3%, and equally."""
    rng = np.random.default_rng(11)
    estimates = []
    for _ in range(200):
        levels = 1e8 * np.exp(rng.normal(0, 0.003, WINDOW)) * np.where(np.arange(WINDOW) >= 10, 1.05, 1.0)
        levels *= np.where(np.arange(WINDOW) >= 22, 0.95, 1.0)
        learned = learn_noise([[v] * 3 for v in levels], 1.0).between_pct
        counted = history_noise(list(levels))
        assert counted == pytest.approx(learned, rel=1e-9)
        estimates.append(learned)
    # One estimate's sd is about 17% of 0.3 (0.05); the median of 200 is within 0.01.
    assert abs(np.median(estimates) - 0.3) < 0.04, np.median(estimates)


def test_a_timed_series_splits_its_level_noise_into_between_and_within() -> None:
    """Timed runs of 5 repetitions, 1% noise within a run and 0.8% between runs, two
    8% steps: the count's estimate (all of one level's noise) is the learned between-run
    noise plus the runs' sampling variance, exactly; each near its true value."""
    rng = np.random.default_rng(29)
    between, total = [], []
    for _ in range(200):
        step = np.where(np.arange(WINDOW) >= 9, 1.08, 1.0) * np.where(np.arange(WINDOW) >= 21, 1.08, 1.0)
        points = [list(s * rng.lognormal(0, 0.008) * rng.lognormal(0, 0.01, 5)) for s in step]
        learned = learn_noise(points, 1.0).between_pct
        counted = history_noise([float(np.mean(p)) for p in points])
        assert counted is not None
        within = float(np.mean([np.var(p, ddof=1) / len(p) / np.mean(p) ** 2 for p in points]))
        if learned > 0:  # not cut at 0 (sampling variance above the level's)
            assert counted**2 == pytest.approx(learned**2 + 1e4 * within, rel=1e-9)
        between.append(learned)
        total.append(counted)
    # True: 0.8% between; sqrt(0.8² + 1²/5) = 0.917% a level. One estimate's sd is about
    # 0.16; the median of 200 lies within 0.03 of its mean; 0.1 leaves room for the
    # estimate's bias (2% low, the cut of normal tails).
    assert abs(np.median(between) - 0.8) < 0.1, np.median(between)
    assert abs(np.median(total) - math.sqrt(0.8**2 + 1 / 5)) < 0.1, np.median(total)


def test_too_few_or_non_positive_levels_give_no_estimate() -> None:
    assert level_variance([1.0]) is None
    assert level_variance([1.0, 0.0, 1.0]) is None
    assert history_noise([1.0, 1.0, 1.0]) is None
    assert history_noise([1.0, 1.0, 1.0, 1.0]) == 0.0
