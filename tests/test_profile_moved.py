"""What the regression report's "why" lists: the shares that moved beyond noise, judged
together over every symbol compared (stats.profile_diff.moved), on simulated profiles
whose truth is known."""

from __future__ import annotations

import numpy as np

from perfline.stats.profile_diff import mean_shares, moved, profile_diff, with_intervals

SYMBOLS = 100
REPETITIONS = 6  # a side, as a tracker's profiled A/B takes


def _side(rng: np.random.Generator, means: np.ndarray) -> list[dict[int, float]]:
    """Repetitions' shares: each symbol's mean share plus noise of 0.5 points."""
    return [{k: float(max(v, 0.0)) for k, v in enumerate(means + rng.normal(0.0, 0.5, SYMBOLS))}
            for _ in range(REPETITIONS)]


def test_nothing_moves_in_a_change_that_moves_nothing() -> None:
    """Same shares on both sides: the list is empty in at least 88 of 100 trials (at most
    5 expected: Bonferroni over the 100 symbols), where per-symbol 95% intervals list
    some symbol almost every time (99 expected)."""
    rng = np.random.default_rng(20261126)
    means = rng.uniform(1.0, 10.0, SYMBOLS)
    listed = naive = 0
    for _ in range(100):
        base, other = _side(rng, means), _side(rng, means)
        found = moved(base, other)
        assert found is not None
        listed += bool(found)
        single = with_intervals(profile_diff(mean_shares(base), mean_shares(other), top=None), base, other)
        naive += any(s.ci_pct is not None and (s.ci_pct[0] > 0 or s.ci_pct[1] < 0) for s in single)
    assert listed <= 12, listed
    assert naive >= 90, naive


def test_a_real_shift_is_found_and_listed_first() -> None:
    """One symbol 4 points up and one 2.5 points down (0.5 points of noise): both listed,
    the stronger first, in at least 95 of 100 trials; their intervals exclude 0."""
    rng = np.random.default_rng(7)
    means = rng.uniform(1.0, 10.0, SYMBOLS)
    after = means.copy()
    after[3] += 4.0
    after[42] -= 2.5
    both = 0
    for _ in range(100):
        found = moved(_side(rng, means), _side(rng, after))
        assert found is not None
        keys = [s.key for s in found]
        both += keys[:2] == [3, 42]
        for s in found:
            assert s.ci_pct is not None and (s.ci_pct[0] > 0 or s.ci_pct[1] < 0)
    assert both >= 95, both


def test_one_profile_a_side_cannot_be_judged() -> None:
    rng = np.random.default_rng(1)
    means = rng.uniform(1.0, 10.0, SYMBOLS)
    assert moved(_side(rng, means)[:1], _side(rng, means)) is None
