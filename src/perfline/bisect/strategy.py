"""Where to measure next, and which commits cannot be told apart.

An untestable commit (its build failed) yields no samples, so the likelihood of "c is
that commit" equals the likelihood of "c is the next commit": no data lies between them.
Such commits are folded into the testable commit that follows them, and the culprit is
reported as that group, the way `git bisect` reports "the first bad commit could be any
of" after skips.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]


def group_heads(testable: BoolArray) -> IntArray:
    """For every commit, the first testable commit at or after it (its group's head)."""
    n = len(testable)
    index = np.where(testable, np.arange(n), n)
    return np.minimum.accumulate(index[::-1])[::-1]


def group_posterior(posterior: FloatArray, testable: BoolArray) -> FloatArray:
    """Posterior mass of each group, stored at its head; zero at untestable commits."""
    return np.bincount(group_heads(testable), weights=posterior, minlength=len(testable))


def halving_probe(posterior: FloatArray, testable: BoolArray) -> int:
    """The testable commit k whose P(c <= k) is closest to one half.

    Measuring k answers "is the culprit at or before k?", so this is the question whose
    answer is most uncertain. The posterior median of c would not do: with the mass on
    two neighbours j-1 and j it keeps proposing j, whose samples only say c <= j, and
    never measures j-1, which is the commit that tells them apart.
    """
    below_or_at = np.cumsum(posterior)
    distance = np.where(testable, np.abs(below_or_at - 0.5), np.inf)
    return int(np.argmin(distance))
