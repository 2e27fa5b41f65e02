"""The model behind noisy bisection: a posterior over the first bad commit.

Commits are indexed 0..N-1 in order; 0 is known good and N-1 known bad. The culprit c
(1..N-1) is the first bad commit: a sample taken at commit k comes from the good level
when k < c and from the bad level when k >= c. Samples are compared as logs, so a step
is a ratio and the noise a relative spread.

The two levels and the noise scale are unknown, and they are integrated out rather than
estimated and plugged in. Plug-in estimates were tried and are overconfident: a scale
fitted at the most probable split is smaller than the true one (the split was chosen
because it fits), and levels refitted to the probes let the model cut the samples of one
level in two. In simulation that stopped at "99.5% sure" on the wrong commit 2-4% of the
time. With flat priors on both levels and on log(scale) the likelihood of culprit c is
closed-form,

    p(samples | c)  ∝  (W0 · W1)^(-1/2) · SS(c)^(-(n-2)/2),

W0 and W1 being the weight of the samples on the good and the bad side of c and SS(c)
the sum of squares within the two sides, and the posterior built on it says 99.5% only
when it is right about that often.

Outliers are handled as in a Student-t model, which is a normal whose precision varies
from sample to sample: each sample gets the t weight of its distance to the nearer
level, so a 10x value from a disturbed run weighs almost nothing while ordinary samples
weigh about one. The weights decide how much a sample counts, never which side it is on.

Everything is computed from prefix sums over commits, O(N + samples) per update, and
from the samples alone, so replaying the same samples gives the same posterior.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# Degrees of freedom of the Student-t behind the outlier weights: a sample 10 scales
# away from both levels weighs 0.06, one at 2 scales still 0.67.
NU = 5.0
# Refinements of the outlier weights after the start from the endpoints, each one
# (most probable split -> robust levels -> weights -> posterior).
WEIGHT_ROUNDS = 2
# A lower bound on the log-scale noise (1e-6 is 0.0001%), so that a benchmark whose
# samples happen to be identical does not divide by zero.
MIN_SCALE = 1e-6

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]


@dataclass(frozen=True)
class Levels:
    """Good and bad level and the noise scale (logs), with the sample weight behind each."""

    good: float
    bad: float
    scale: float
    good_n: float
    bad_n: float

    @property
    def dof(self) -> float:
        """Residual degrees of freedom of the scale (two levels were fitted)."""
        return max(self.good_n + self.bad_n - 2.0, 1.0)

    @property
    def step_stderr(self) -> float:
        return self.scale * float(np.sqrt(1.0 / self.good_n + 1.0 / self.bad_n))


@dataclass(frozen=True)
class Fit:
    posterior: FloatArray  # P(c = k) for k = 0..N-1; entry 0 is always 0
    weights: FloatArray  # per sample, in (0, 1]


def percent(log_ratio: float) -> float:
    """A difference of logs as a change in percent."""
    return 100.0 * float(np.expm1(log_ratio))


def _weighted_levels(y: FloatArray, w: FloatArray, bad: BoolArray) -> Levels:
    """Weighted means of the two sides and their pooled scale."""
    w_good, w_bad = w * ~bad, w * bad
    n_good, n_bad = float(w_good.sum()), float(w_bad.sum())
    good = float((w_good * y).sum() / n_good)
    bad_level = float((w_bad * y).sum() / n_bad)
    ss = float((w_good * (y - good) ** 2).sum() + (w_bad * (y - bad_level) ** 2).sum())
    scale = max(float(np.sqrt(ss / max(n_good + n_bad - 2.0, 1.0))), MIN_SCALE)
    return Levels(good, bad_level, scale, n_good, n_bad)


def _median(x: FloatArray) -> float:
    # np.median's generality costs ten times more than sorting the few dozen samples a
    # bisection has, and the simulation calls this millions of times.
    ordered = np.sort(x)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return 0.5 * float(ordered[middle - 1] + ordered[middle])


def _robust_levels(y: FloatArray, bad: BoolArray) -> Levels:
    """Medians of the two sides and a MAD scale: what the outlier weights are judged by."""
    good, bad_level = _median(y[~bad]), _median(y[bad])
    spread = np.abs(np.where(bad, y - bad_level, y - good))
    # With one sample a side there is no spread yet; half the step is a generous stand-in
    # that lets every sample count fully until there is one.
    scale = 1.4826 * _median(spread) or abs(bad_level - good) / 2.0
    scale = max(scale, MIN_SCALE)
    return Levels(good, bad_level, scale, float((~bad).sum()), float(bad.sum()))


def outlier_weights(y: FloatArray, levels: Levels) -> FloatArray:
    """Student-t precision weights of each sample's distance to the nearer level."""
    distance = np.minimum(np.abs(y - levels.good), np.abs(y - levels.bad)) / levels.scale
    return np.minimum((NU + 1.0) / (NU + distance**2), 1.0)


@dataclass(frozen=True)
class Splits:
    """The two sides under every culprit c = 1..N-1 (entry c-1): weight, mean and the
    pooled sum of squares within the sides. Means are of the centred logs (`y - centre`)."""

    w0: FloatArray
    m0: FloatArray
    w1: FloatArray
    m1: FloatArray
    ss: FloatArray
    n: int  # samples, whatever their weights

    @property
    def dof(self) -> float:
        return max(self.n - 2.0, 1.0)


def splits(n_commits: int, commits: IntArray, y: FloatArray, w: FloatArray) -> Splits:
    """Both sides of every split from prefix sums over commits, O(N + samples)."""
    # Centring keeps the prefix sums of squares from cancelling catastrophically.
    y = y - _median(y)
    # bincount with weights is float64 (the stubs say int whatever the weights).
    count = np.cumsum(np.bincount(commits, weights=w, minlength=n_commits).astype(np.float64))
    total = np.cumsum(np.bincount(commits, weights=w * y, minlength=n_commits))
    square = np.cumsum(np.bincount(commits, weights=w * y * y, minlength=n_commits))
    # Culprit c puts commits 0..c-1 on the good side: prefix index c-1.
    w0, s0, q0 = count[:-1], total[:-1], square[:-1]
    w1, s1, q1 = count[-1] - w0, total[-1] - s0, square[-1] - q0
    ss = np.maximum(q0 - s0**2 / w0 + q1 - s1**2 / w1, len(y) * MIN_SCALE**2)
    return Splits(w0, s0 / w0, w1, s1 / w1, ss, len(y))


def log_posterior(n_commits: int, commits: IntArray, y: FloatArray, w: FloatArray) -> FloatArray:
    """Normalised log P(c = k | samples), uniform prior over 1..N-1, levels and scale
    integrated out."""
    s = splits(n_commits, commits, y, w)
    log_p = np.empty(n_commits)
    log_p[0] = -np.inf
    log_p[1:] = -0.5 * np.log(s.w0 * s.w1) - 0.5 * (s.n - 2) * np.log(s.ss)
    log_p -= log_p[1:].max()
    return log_p - np.log(np.exp(log_p).sum())


def _endpoints(n_commits: int, commits: IntArray) -> tuple[BoolArray, BoolArray]:
    """Which samples are at an endpoint, and which of those at the bad one."""
    at_good, at_bad = commits == 0, commits == n_commits - 1
    if not at_good.any() or not at_bad.any():
        raise ValueError("both endpoints need at least one sample")
    ends = at_good | at_bad
    return ends, at_bad[ends]


def endpoint_levels(n_commits: int, commits: IntArray, y: FloatArray) -> Levels:
    """Levels and scale from the endpoint samples alone, outliers down-weighted."""
    ends, bad = _endpoints(n_commits, commits)
    y_ends = y[ends]
    return _weighted_levels(y_ends, outlier_weights(y_ends, _robust_levels(y_ends, bad)), bad)


def levels_at(culprit: int, commits: IntArray, y: FloatArray, w: FloatArray) -> Levels:
    """The levels implied by one culprit: samples before it are good, from it on bad."""
    return _weighted_levels(y, w, commits >= culprit)


def fit(n_commits: int, commits: IntArray, y: FloatArray) -> Fit:
    """Posterior over the culprit, with outlier weights from its most probable value."""
    ends, bad = _endpoints(n_commits, commits)
    w = outlier_weights(y, _robust_levels(y[ends], bad))
    log_p = log_posterior(n_commits, commits, y, w)
    for _ in range(WEIGHT_ROUNDS):
        w = outlier_weights(y, _robust_levels(y, commits >= int(np.argmax(log_p))))
        log_p = log_posterior(n_commits, commits, y, w)
    return Fit(np.exp(log_p), w)
