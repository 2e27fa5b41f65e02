"""Group-sequential boundaries: against published tables, and against Brownian paths."""

from __future__ import annotations

import numpy as np
import pytest

from perfline.stats.sequential import SequentialPlan
from perfline.stats.spending import Boundary, Spending, fractions_of

FIVE_EQUAL = (0.2, 0.4, 0.6, 0.8, 1.0)


@pytest.mark.parametrize(("kind", "published"), [
    # Lan-DeMets O'Brien-Fleming-type spending, five equally spaced looks, one-sided 0.025
    # (Jennison and Turnbull 2000, Table 7.6; gsDesign's sfLDOF).
    (Spending.OBRIEN_FLEMING, (4.877, 3.357, 2.680, 2.290, 2.031)),
    # Pocock-type spending, the same looks (gsDesign's sfLDPocock).
    (Spending.POCOCK, (2.438, 2.427, 2.410, 2.397, 2.386)),
])
def test_boundaries_match_the_published_ones(kind: Spending, published: tuple[float, ...]) -> None:
    boundary = Boundary(FIVE_EQUAL, 0.025, kind)
    assert boundary.z == pytest.approx(published, abs=0.0015)
    assert sum(boundary.spent) == pytest.approx(0.025, rel=1e-6)


def test_brownian_paths_cross_the_bisections_boundary_at_alpha() -> None:
    """The confirmation's looks (4, 6, 9, 14, 21, 32 a side) at one-sided 0.01: 400,000
    standard Brownian paths observed at those fractions cross the boundary 1% of the time
    (s.e. 0.016%), each look about its share of the spending function."""
    looks = (4, 6, 9, 14, 21, 32)
    boundary = Boundary(fractions_of(looks), 0.01, Spending.POCOCK)
    rng = np.random.default_rng(3)
    t = np.array(fractions_of(looks))
    score = np.cumsum(rng.standard_normal((400_000, len(t))) * np.sqrt(np.diff(t, prepend=0.0)), axis=1)
    crossed = score / np.sqrt(t) >= np.array(boundary.z)
    first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), -1)
    assert np.mean(first >= 0) == pytest.approx(0.01, abs=0.0006)
    per_look = np.bincount(first[first >= 0], minlength=len(t)) / len(first)
    assert per_look == pytest.approx(boundary.spent, abs=0.0004)


def test_spending_gives_the_first_and_last_looks_more_than_bonferroni() -> None:
    """Bonferroni's alpha / looks left the looks' correlation unused; a Pocock-type
    boundary spends all of alpha. Its levels follow the information: the first look (a
    fifth of it) and the last get more than alpha / looks, a look close after another
    less (it adds little information of its own)."""
    plan = SequentialPlan.up_to(30, 0.01)
    first, last = plan.looks[0], plan.looks[-1]
    assert plan.alpha_at(first) > 0.01 / len(plan.looks) and plan.alpha_at(last) > 0.01 / len(plan.looks)
    assert plan.confidence_at(last) < 1 - 0.05 / len(plan.looks)
    assert plan.alpha_at(plan.looks[0] + 1) == plan.alpha_at(plan.looks[0])  # between looks: the last look's


def test_bad_fractions_are_refused() -> None:
    with pytest.raises(ValueError, match="rise from above 0 to 1"):
        Boundary((0.5, 0.4, 1.0), 0.01, Spending.POCOCK)
    with pytest.raises(ValueError, match="rise from above 0 to 1"):
        Boundary((0.5, 0.9), 0.01, Spending.POCOCK)
