"""A two-sample t-test that may be looked at after every sample: an e-process.

The bisection's confirmation (bisect/confirm.py) compares fresh samples of a culprit
and its parent and would stop as soon as they show the step. A t-test looked at after
every pair rejects an A/A pair far more often than its alpha; a group-sequential
boundary holds the level only approximately with a t statistic of a few degrees of
freedom (the Pocock boundary perfline used, computed for normal statistics, confirmed
1.19% of 10,000 Gaussian A/A pairs at alpha 1%, s.e. 0.11: docs/bisect.md).

This test holds it exactly, at any number of looks. Both samples are normal with one
unknown mean and scale under the null; under the alternative the second one's mean is
`effect` scales higher. Both hypotheses are unchanged when every value is moved and
stretched (x -> a + b·x, b > 0), and for such a problem the Bayes factor that integrates
the mean and the scale over the group's right Haar measure (dμ dσ / σ) is the likelihood
ratio of the maximal invariant, a nonnegative martingale under the null (Pérez-Ortiz,
Lardy, de Heide and Grünwald, "E-statistics, group invariance and anytime-valid
testing", Ann. Statist. 2024). By Ville's inequality it ever reaches 1/alpha with
probability at most alpha, however often and whenever it is looked at, and whatever
stops it. A mixture of such factors over several effects, with weights fixed in advance,
is one too.

With n samples (n0 and n1 a side), m = n0·n1/n, D the difference of the two means, S the
sum of squares within the sides and Q = S + m·D², integrating the mean out leaves

    BF(effect) = exp(-m·effect²/2) · I(n-2, effect·√m·D·√(m/Q)) / I(n-2, 0),
    I(k, c) = ∫_0^∞ v^k exp(-v²/2 + c·v) dv,

the ratio of a noncentral to a central t density at the observed t.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

# Simpson's rule for I(k, c) on 1201 points over [0, top], one grid for all the c of a
# call. Each integrand has one peak, at v* = (c + sqrt(c² + 4k)) / 2, and falls at least
# as fast as exp(-(v - v*)²/2) after it, so top = the highest v* + 14 holds all but e^-98
# of every one. Against the parabolic cylinder closed form (tests/test_anytime_t.py) the
# logs are right to 1e-4 where c >= -3 (an e-value to 0.01%); further below (the data
# against the bet, an e-value far below 1 that decides nothing) the integrand falls from
# v = 0 faster than the grid resolves and the log is only right to about 0.1.
_POINTS = 1201
_SIMPSON = np.ones(_POINTS)
_SIMPSON[1:-1:2], _SIMPSON[2:-1:2] = 4.0, 2.0
_LOG_SIMPSON = np.log(_SIMPSON / 3.0)
_UNIT = np.linspace(0.0, 1.0, _POINTS)
_TAIL = 14.0


def log_integrals(k: int, c: ArrayLike) -> np.ndarray:
    """log I(k, c) = log ∫_0^∞ v^k exp(-v²/2 + c·v) dv for each c, for k >= 0."""
    cs = np.asarray(c, dtype=float)
    top = float(((cs + np.sqrt(cs * cs + 4.0 * k)) / 2.0).max()) + _TAIL
    v = _UNIT * top
    with np.errstate(divide="ignore"):  # v = 0 with k > 0: the integrand's zero
        log_v = k * np.log(v) if k > 0 else np.zeros_like(v)
    log_f = (log_v - 0.5 * v * v + _LOG_SIMPSON) + cs[:, None] * v
    peak = log_f.max(axis=1)
    return np.asarray(peak + np.log(np.exp(log_f - peak[:, None]).sum(axis=1) * top / (_POINTS - 1)))


def log_e_value(a: ArrayLike, b: ArrayLike, effects: ArrayLike) -> float:
    """log of the e-value that `b` lies higher than `a`: the Bayes factor above, averaged
    over `effects` (in units of the common scale, each > 0 for "b higher"; a negative
    one bets on "b lower"). Needs at least three values and one a side; a sample without
    any spread says nothing (0, an e-value of 1)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n0, n1 = len(x), len(y)
    n = n0 + n1
    if n0 < 1 or n1 < 1 or n < 3:
        raise ValueError("an e-value needs a value a side and three in all")
    m = n0 * n1 / n
    difference = float(y.mean() - x.mean())
    within = float(((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum())
    total = within + m * difference * difference
    if total <= 0.0:
        return 0.0
    r = difference * np.sqrt(m / total)  # in (-1, 1): the t statistic, rescaled
    e = np.asarray(effects, dtype=float)
    logs = log_integrals(n - 2, np.concatenate([[0.0], e * np.sqrt(m) * r]))
    terms = -0.5 * m * e * e + logs[1:] - logs[0]
    top = float(terms.max())
    return top + float(np.log(np.exp(terms - top).mean()))
