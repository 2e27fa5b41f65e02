"""The anytime-valid two-sample t-test (stats/anytime_t.py): its integral against the
closed form, and what the e-value must not depend on."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammaln, pbdv

from perfline.stats.anytime_t import log_e_value, log_integrals


@pytest.mark.parametrize("k", [0, 1, 2, 5, 20, 62])
def test_the_integral_matches_the_parabolic_cylinder_closed_form(k: int) -> None:
    # I(k, c) = Γ(k+1) e^(c²/4) D_{-k-1}(-c); scipy's D overflows past c of about 35,
    # which the quadrature reaches (c up to 1.5 x the bet x sqrt(16) at 32 a side).
    c = np.array([-3.0, -1.0, 0.0, 0.5, 3.0, 10.0, 25.0])
    d = pbdv(-k - 1.0, -c)[0]
    closed = gammaln(k + 1) + c * c / 4 + np.log(d)
    assert np.max(np.abs(log_integrals(k, c) - closed)) < 1e-4


def test_the_e_value_depends_on_the_samples_only_up_to_a_common_shift_and_scale() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(6), rng.standard_normal(6) + 1.0
    bets = [0.5, 1.0, 1.5]
    e = log_e_value(a, b, bets)
    assert log_e_value(3.0 + 0.01 * a, 3.0 + 0.01 * b, bets) == pytest.approx(e, abs=1e-9)
    # Against the bet's direction it says so: far below 1.
    assert log_e_value(b, a, bets) < -2 < 0 < e


def test_the_e_value_grows_with_the_evidence_and_shrinks_under_none() -> None:
    rng = np.random.default_rng(4)
    noise = rng.standard_normal((2, 32))
    step = [log_e_value(noise[0, :n], noise[1, :n] + 2.0, [2.0]) for n in (2, 4, 8, 16, 32)]
    same = [log_e_value(noise[0, :n], noise[1, :n], [2.0]) for n in (2, 4, 8, 16, 32)]
    assert step == sorted(step) and step[-1] > np.log(1e6)
    assert max(same) < np.log(1 / 0.01) and same[-1] < 0


def test_a_sample_without_spread_says_nothing_and_too_few_values_are_refused() -> None:
    assert log_e_value([1.0, 1.0], [1.0, 1.0], [1.0]) == 0.0
    with pytest.raises(ValueError):
        log_e_value([1.0], [2.0], [1.0])
