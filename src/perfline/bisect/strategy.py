"""Where to measure next, and which commits cannot be told apart.

An untestable commit (its build failed) yields no samples, so the likelihood of "c is
that commit" equals the likelihood of "c is the next commit": no data lies between them.
Such commits are folded into the testable commit that follows them, and the culprit is
reported as that group, the way `git bisect` reports "the first bad commit could be any
of" after skips.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy.special import stdtrit

from perfline.bisect import posterior as model

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]

# Probabilities at which each predictive distribution is evaluated for the expected
# information. Points placed by each distribution's own quantiles follow any noise scale;
# a fixed grid was too coarse when the two levels are a hundred noise widths apart.
QUADRATURE = (np.arange(12) + 0.5) / 12
# Candidate probes besides the endpoints: the commits at these points of P(c <= k).
CANDIDATE_QUANTILES = np.linspace(0.05, 0.95, 19)
# Hypotheses with less posterior mass than this change no choice and are left out.
NEGLIGIBLE = 1e-7
# Gains (in nats) closer than this are equal.
TIE = 1e-9


@lru_cache(maxsize=256)
def _quadrature_points(dof: float) -> FloatArray:
    # scipy's ppf costs more than the rest of a probe choice; dof is the sample count - 2.
    # stdtrit(df, q) is scipy.stats.t.ppf(q, df) without scipy.stats's second of import.
    return np.asarray(stdtrit(dof, QUADRATURE))


def group_heads(testable: BoolArray) -> IntArray:
    """For every commit, the first testable commit at or after it (its group's head)."""
    n = len(testable)
    index = np.where(testable, np.arange(n), n)
    return np.minimum.accumulate(index[::-1])[::-1]


def group_posterior(posterior: FloatArray, testable: BoolArray) -> FloatArray:
    """Posterior mass of each group, stored at its head; zero at untestable commits."""
    return np.bincount(group_heads(testable), weights=posterior, minlength=len(testable)).astype(np.float64)


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


def informative_probe(
    posterior: FloatArray, testable: BoolArray, commits: IntArray, y: FloatArray, w: FloatArray
) -> int:
    """The candidate commit whose next sample is expected to tell most about the culprit.

    Halving the posterior is the best question when the two levels are known. They are
    not: they are learnt from the same samples, and a posterior that leans on a level
    seen in two unlucky samples sends halving after the wrong half for many runs (a
    third of the runs, in bench/bisect_sim.py, went to such trials). The expected
    information of a sample at k, I(sample; culprit), counts both: a sample at k splits
    the culprits into "k is bad" and "k is good", and each culprit predicts the sample
    with its own levels and scale (Student-t, as the integrated model implies). When
    the culprits agree on the levels this picks the halving commit; when they disagree,
    a sample at an endpoint can be worth more, and it is taken.
    """
    n = len(posterior)
    at_or_below = np.cumsum(posterior)
    top, halving = int(np.argmax(posterior)), halving_probe(posterior, testable)
    candidates = {0, n - 1, halving, top - 1, top,
                  *np.searchsorted(at_or_below, CANDIDATE_QUANTILES).tolist()}
    probes = np.array(sorted(k for k in candidates if 0 <= k < n and testable[k]))

    split = model.splits(n, commits, y, w)
    sampled = np.unique(commits)
    # Culprits in (lo, hi] between two sampled commits put the same samples on each
    # side, so they share one split, the one at c = lo + 1 (entry lo).
    lo, hi = sampled[:-1], sampled[1:]
    below = np.concatenate([[0.0], at_or_below])  # below[x] = P(c < x)
    held = below[hi + 1] - below[lo + 1] > NEGLIGIBLE
    lo, hi = lo[held], hi[held]
    scale = np.sqrt(split.ss[lo] / split.dof)
    # Every group predicts a sample on its bad side or on its good side; which one
    # depends on the probe, through how much of the group's mass lies at or below it.
    mean = np.concatenate([split.m1[lo], split.m0[lo]])
    width = np.concatenate([scale * np.sqrt(1 + 1 / split.w1[lo]), scale * np.sqrt(1 + 1 / split.w0[lo])])
    cut = np.clip(probes[:, None], lo, hi)
    mass = np.concatenate([below[cut + 1] - below[lo + 1], below[hi + 1] - below[cut + 1]], axis=1)
    mass /= mass.sum(axis=1, keepdims=True)

    # I(sample; c) = E[log p(sample | c) - log p(sample)], the expectation taken at the
    # quadrature points of every prediction. The Student-t constant cancels.
    points = mean[:, None] + width[:, None] * _quadrature_points(split.dof)
    z = (points[:, :, None] - mean) / width
    log_pdf = -0.5 * (split.dof + 1) * np.log1p(z * z / split.dof) - np.log(width)
    own = np.diagonal(log_pdf, axis1=0, axis2=2).T
    mixture = np.log(np.exp(log_pdf) @ mass.T)  # (hypothesis, point, probe)
    gain = np.einsum("ph,hp->p", mass, (own[:, :, None] - mixture).mean(axis=1))
    # Halving wins ties (commits 31 and 32 of 64 split a flat posterior equally well),
    # which keeps the choice the same on every machine whatever the rounding.
    if gain[np.searchsorted(probes, halving)] >= gain.max() - TIE:
        return halving
    return int(probes[int(np.argmax(gain))])
