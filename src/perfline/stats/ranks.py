"""The Mann–Whitney U test's and the Wilcoxon signed-rank test's two-sided p-values
from numpy and scipy.special alone.

scipy.stats takes 0.85 s to import on the 2-vCPU VM (`python -X importtime`), more than
`perfline compare` spends comparing 2,000 runs a side; the rank test shown beside every
comparison is all it needed of it. The p-values equal those of
`scipy.stats.mannwhitneyu(x, y, alternative="two-sided")` (method "auto"; to 1e-9 on
random samples, tests/test_stats_compare.py): the exact null distribution of U when a
side has at most EXACT_MAX_N values and none are tied, else the normal approximation
with the tie correction and the continuity correction. The signed-rank p-values equal
`scipy.stats.wilcoxon(d, alternative="two-sided")`'s where neither has to handle zeros or
ties (the caller asks scipy.stats then): 1.7 ms a call there at 20 pairs, 0.06 ms here
(scipy's time is mostly its array-API wrappers), and `ab --pairs auto` and the A/B of a
bisection judge at every look.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr

# Up to this many values on the smaller side (and no ties) the p-value is exact.
EXACT_MAX_N = 8
# Up to this many differences (none zero, no ties) the signed-rank p-value is exact
# (scipy.stats.wilcoxon's method "auto"); beyond, the normal approximation.
SIGNED_EXACT_MAX_N = 50


def mann_whitney_p(x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    """Two-sided p-value of "x and y come from one distribution" against a shift."""
    n1, n2 = len(x), len(y)
    ranks, ties = _average_ranks(np.concatenate([x, y]))
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    # The larger of U1 and U2 (= n1·n2 - U1), its upper tail doubled.
    u = max(u1, n1 * n2 - u1)
    if min(n1, n2) <= EXACT_MAX_N and not (ties > 1).any():
        p = 2 * _exact_upper_tail(round(u), n1, n2)
    else:
        p = 2 * _normal_upper_tail(u, n1, n2, ties)
    return min(p, 1.0)  # at U = n1·n2/2 both tails hold the middle value


def _average_ranks(values: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Ranks from 1, tied values sharing their mean rank; and the size of each group of
    equal values."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    sizes = np.diff(np.append(starts, len(values)))
    ranks = np.empty(len(values))
    # A group taking places start+1 .. start+size has the mean rank start + (size+1)/2.
    ranks[order] = np.repeat(starts + (sizes + 1) / 2, sizes)
    return ranks, sizes


def _normal_upper_tail(u: float, n1: int, n2: int, ties: NDArray[np.int64]) -> float:
    """P(U >= u) by the normal approximation: ties shrink U's variance by
    Σ(t³ - t) / (n(n - 1)) of its (n + 1) term; 0.5 subtracted for U's discreteness."""
    n = n1 + n2
    tie_term = float(np.sum(ties.astype(float) ** 3 - ties))
    sd = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    if sd == 0:  # every value equal: U is its mean, no evidence of a shift
        return 1.0
    return float(ndtr(-(u - n1 * n2 / 2 - 0.5) / sd))


def _exact_upper_tail(u: int, n1: int, n2: int) -> float:
    """P(U >= u) when all C(n1 + n2, n1) orders of the pooled values are equally likely."""
    counts = _u_counts(min(n1, n2), max(n1, n2))
    return sum(counts[u:]) / math.comb(n1 + n2, n1)


@cache
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many orders give each U = 0 .. m·n: the coefficients of the Gaussian binomial
    [m + n choose m] in q, the product over i = 1..m of (1 - q^(n+i)) / (1 - q^i), taken
    as power series cut at q^(m·n) (no coefficient at or below it depends on the cut).
    Python integers (an object array): C(m + n, m) passes 2^63 at m = 8, n = 1,000."""
    series = np.zeros(m * n + 1, dtype=object)
    series[0] = 1
    for i in range(1, m + 1):
        step = n + i
        series[step:] = series[step:] - series[:-step]  # times (1 - q^step)
        for start in range(i):  # divided by (1 - q^i): a running sum along every i-th term
            series[start::i] = np.cumsum(series[start::i])
    return tuple(int(c) for c in series)


def signed_rank_p(d: NDArray[np.float64]) -> float | None:
    """Two-sided p-value of "the differences d are symmetric about 0" by the rank sum of
    the positive ones; None when a difference is 0 or two magnitudes tie."""
    n = len(d)
    magnitudes = np.abs(d)
    if n == 0 or not magnitudes.all() or len(np.unique(magnitudes)) < n:
        return None
    ranks = np.empty(n)
    ranks[np.argsort(magnitudes)] = np.arange(1, n + 1)
    r_plus = round(float(ranks[d > 0].sum()))
    if n <= SIGNED_EXACT_MAX_N:
        counts = _signed_rank_counts(n)
        tail = min(sum(counts[: r_plus + 1]), sum(counts[r_plus:]))
        return min(1.0, 2 * tail / 2**n)
    z = (r_plus - n * (n + 1) / 4) / math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return min(1.0, float(2 * ndtr(-abs(z))))


@cache
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """How many of the 2^n sign patterns give each rank sum 0 .. n(n+1)/2: the
    coefficients of the product over k = 1..n of (1 + q^k)."""
    counts = [1]
    for k in range(1, n + 1):
        grown = counts + [0] * k
        for total, count in enumerate(counts):
            grown[total + k] += count
        counts = grown
    return tuple(counts)
