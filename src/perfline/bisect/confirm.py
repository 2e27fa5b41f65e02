"""Confirmation of a bisected culprit: an A/B of fresh samples against its parent.

The posterior rests on a model: one clean step, the same noise everywhere, a machine
that does not drift while the bisection runs. The A/B checks the answer without that
model: a two-sample test of the culprit's samples against its parent's, one-sided in
the direction the bisection found, that uses no sample of any other commit.

Its samples are **fresh**: taken after the posterior reached its confidence, none of
those that made the bisection choose the pair (a test on those passes more easily than
their noise says: on A/A data the old A/B that reused them confirmed 15% of the time at
its nominal 5%). Every wrong answer of the bisection is a pair of commits on the same
side of the step, i.e. an A/A pair, so the chance that a wrong culprit is confirmed is
at most the A/B's alpha, 0.01, whatever misled the posterior.

The samples are taken alternately (ABBA: a linear drift adds the same to both sides at
every even count a side) and the test is looked at after every pair, from two samples a
side up to MAX_A_SIDE. It is an e-process (`stats.anytime_t`): a scale-invariant Bayes
factor of the logs for a step of the size the bisection estimated, in units of the
noise it estimated, averaged over half, the same and one and a half times that size. The
bet is placed before the fresh samples, so under an A/A pair it is a martingale and
reaches 1/alpha with probability at most alpha (Ville's inequality), however many looks
it takes and whether or not the bisection stops it early. It replaced a t-test on a
Pocock-type boundary over six looks (4 to 32 a side), which holds its level only
approximately with a few degrees of freedom (1.19% of 10,000 Gaussian A/A pairs, s.e.
0.11, at alpha 1%) and took 1.6-1.8 more runs a bisection (docs/bisect.md). The
reported p-value is the anytime-valid one, 1 / the largest e-value seen, and the
interval is the set of steps the same test does not reject at 95% (the e-value of "the
step is d", two-sided, below 20): it covers the step at whatever count the A/B stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy.optimize import brentq

from perfline.bisect.posterior import percent
from perfline.stats.anytime_t import log_e_value
from perfline.stats.two_sample import outlier_indexes

# The error rate of the rest of the tool (compare, ab, change points).
ALPHA = 0.01
# Of the reported interval.
CONFIDENCE = 0.95
# Samples a side: the first look, where a step many times the noise already decides, and
# the last, where a 5% step in 3% noise is confirmed 99.7% of the time (a step the
# bisection can find at all, in the runs it takes).
FIRST_A_SIDE = 2
MAX_A_SIDE = 32
# The sizes bet on, as multiples of the step the bisection estimated (in noise units).
# The estimate is from the probes that chose the pair, whose noise is low more often
# than not (the posterior stops soonest when its samples happen to look quiet): betting
# on half the size as well keeps the test quick when the step is smaller than it looked.
# At 2% noise, against the estimate alone: 12.6 runs a confirmation instead of 14.9.
BETS = (0.5, 1.0, 1.5)
# A disturbed run (a sample 10x off) would inflate the test's noise until its last look:
# one among the first samples of an A/B of a real 5% step in 2% noise left it
# unconfirmed 200 times in 200. From JUDGE_FROM_A_SIDE samples a side on, a sample whose
# log lies more than SET_ASIDE_Z robust sds from its side's median (both sides pooled,
# each centred on its own median, as `compare` looks for outliers) is set aside from the
# test, kept in the posterior (which weighs it down itself), and its side is measured
# again. Leaving samples out by their values is outside Ville's bound: at 5 robust sds
# from 3 a side (`compare`'s threshold) the few samples of the first looks lost their
# tails often enough to confirm 1.30% of Gaussian A/A pairs; at 10 sds from 5 a side,
# 0.37% (0.48% with none set aside; 1.3% of Gaussian A/Bs set one aside, 8.5% from 3 a
# side, where a MAD of few samples is often small), and a 10x run is still 115 sds out
# in 2% noise. An earlier outlier is set aside when the sides reach 5. An A/B that has
# set aside more than MAX_SET_ASIDE ends unconfirmed.
JUDGE_FROM_A_SIDE = 5
SET_ASIDE_Z = 10.0
MAX_SET_ASIDE = 8
# The estimate is clipped to this range: below it the bisection could not have been
# sure, and above it (noise estimated near zero) every bet would be on a step that
# decides at the first look whatever it is.
EFFECT_RANGE = (0.25, 20.0)


class Decision(StrEnum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    NOT_CONFIRMED = "not-confirmed"


@dataclass(frozen=True)
class Confirmation:
    decision: Decision
    change_pct: float  # culprit vs parent, means of the logs, at the latest look
    # The steps the test does not reject at 95%, at the latest look; NaN while it
    # rejects none (at two samples a side the scale-invariant test cannot yet).
    ci_pct: tuple[float, float]
    # Anytime-valid and one-sided in the direction the bisection found: 1 / the largest
    # e-value of the looks so far. The A/B confirms when it is at most alpha.
    p_value: float
    samples: int  # fresh samples at the parent and the culprit together


@dataclass(frozen=True)
class _Look:
    change_pct: float
    ci_pct: tuple[float, float] | None  # None until asked for: it costs a few dozen e-values
    log_e: float  # the one-sided e-value's log


class ABConfirmation:
    """A/B of `culprit` against `parent` on the samples `observe` is given, which must
    be taken after the bisection chose the pair.

    `increase` is the direction the bisection found (the culprit's level is higher) and
    `effect` the step it estimated over the noise it estimated (logs). The test looks
    whenever both sides have the same count, from FIRST_A_SIDE on; the A/B is
    confirmed at the first look whose e-value reaches 1/alpha, not confirmed at
    `max_a_side` a side.
    """

    def __init__(
        self, parent: int, culprit: int, increase: bool, effect: float, max_a_side: int = MAX_A_SIDE
    ) -> None:
        if parent == culprit:
            raise ValueError("parent and culprit must differ")
        if not np.isfinite(effect) or effect <= 0:
            raise ValueError(f"the estimated effect must be positive, got {effect!r}")
        self.parent, self.culprit, self.increase, self.max_a_side = parent, culprit, increase, max_a_side
        self.effect = float(np.clip(effect, *EFFECT_RANGE))
        self._last: int | None = None
        self._samples: dict[int, list[float]] = {parent: [], culprit: []}
        # Per look and set of samples set aside: a look's samples change only when a
        # sample is set aside.
        self._judged: dict[tuple[int, tuple[int, ...]], _Look] = {}
        self._stopped = False
        # The samples' screen for outliers, redone only when a sample is added: the
        # counts it was made at, the indexes set aside, each side's kept samples.
        self._screened: tuple[tuple[int, int], tuple[int, ...], list[float], list[float]] = ((0, 0), (), [], [])

    def observe(self, commit: int, value: float) -> None:
        if commit not in self._samples:
            raise ValueError(f"commit {commit} is neither the parent nor the culprit")
        if not value > 0 or not np.isfinite(value):
            raise ValueError(f"sample values must be positive and finite, got {value!r}")
        self._samples[commit].append(value)
        self._last = commit

    def stop(self) -> None:
        """End the A/B before its last look: not confirmed, unless a look already did."""
        self._stopped = True

    def _screen(self) -> tuple[tuple[int, ...], list[float], list[float]]:
        """The indexes of the outliers among all samples (the parent's first), and each
        side's samples in the order taken with the outliers set aside."""
        a, b = self._samples[self.parent], self._samples[self.culprit]
        counts = (len(a), len(b))
        if self._screened[0] != counts:  # samples are only ever added
            out: tuple[int, ...] = ()
            if min(counts) >= JUDGE_FROM_A_SIDE:
                la, lb = np.log(a), np.log(b)
                out = outlier_indexes(np.concatenate([la - np.median(la), lb - np.median(lb)]), SET_ASIDE_Z)
            self._screened = (counts, out, [v for i, v in enumerate(a) if i not in out],
                              [v for i, v in enumerate(b, start=len(a)) if i not in out])
        return self._screened[1:]

    def _set_aside(self) -> tuple[int, ...]:
        return self._screen()[0]

    def _kept(self) -> tuple[list[float], list[float]]:
        return self._screen()[1:]

    def _taken(self) -> int:
        return min(len(side) for side in self._kept())

    def spent(self) -> float:
        """The alpha the A/B may have spent: all of it from its first look on (Ville's
        bound is over every look to come, not a share per look), none before."""
        return ALPHA if self._taken() >= FIRST_A_SIDE else 0.0

    def ran_out(self) -> bool:
        """Whether the A/B reached its last look, or set aside too many samples."""
        return self._taken() >= self.max_a_side or len(self._set_aside()) > MAX_SET_ASIDE

    def taken(self, commit: int) -> list[float]:
        """The A/B's samples at `commit` (none unless it is the parent or the culprit)."""
        return list(self._samples.get(commit, ()))

    def next_probe(self) -> int | None:
        """The side with fewer samples kept; on a tie the side measured last, which makes ABBA."""
        if self.result().decision is not Decision.PENDING:
            return None
        a, b = (len(side) for side in self._kept())
        if a != b:
            return self.parent if a < b else self.culprit
        return self._last if self._last is not None else self.parent

    def _logs(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self._kept()
        return np.log(np.asarray(a[:n], dtype=float)), np.log(np.asarray(b[:n], dtype=float))

    def _bets(self) -> list[float]:
        sign = 1.0 if self.increase else -1.0
        return [sign * share * self.effect for share in BETS]

    def _look(self, n: int) -> _Look:
        key = (n, self._set_aside())
        if key not in self._judged:
            a, b = self._logs(n)
            difference = float(b.mean() - a.mean())
            self._judged[key] = _Look(percent(difference), None, log_e_value(a, b, self._bets()))
        return self._judged[key]

    def _interval(self, n: int) -> tuple[float, float]:
        """The steps d whose two-sided e-value at look n stays below 1/(1 - CONFIDENCE)."""
        a, b = self._logs(n)
        bets = [s * share * self.effect for share in BETS for s in (1.0, -1.0)]
        limit = np.log(1.0 / (1.0 - CONFIDENCE))

        def excess(d: float) -> float:
            return log_e_value(a, b - d, bets) - limit

        centre = float(b.mean() - a.mean())
        # Far from the data the e-value tends to its largest, that of a perfect split;
        # below the limit there (too few samples) no step is rejected.
        spread = float(np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / n)) or 1e-6
        bounds = []
        for direction in (-1.0, 1.0):
            reach = spread
            while excess(centre + direction * reach) < 0:
                reach *= 2
                if reach > 1e3 * spread:
                    return float("nan"), float("nan")
            bounds.append(brentq(excess, centre, centre + direction * reach, xtol=1e-6))
        return percent(min(bounds)), percent(max(bounds))

    def result(self) -> Confirmation:
        taken = min(self._taken(), self.max_a_side)
        set_aside = self._set_aside()
        samples = len(self._samples[self.parent]) + len(self._samples[self.culprit])
        nan = float("nan")
        decision, last, best = Decision.PENDING, 0, -np.inf
        for n in range(FIRST_A_SIDE, taken + 1):
            last, best = n, max(best, self._look(n).log_e)
            if best >= np.log(1.0 / ALPHA):
                decision = Decision.CONFIRMED
                break
        else:
            if self.ran_out() or self._stopped:
                decision = Decision.NOT_CONFIRMED
        if not last:
            return Confirmation(decision, nan, (nan, nan), nan, samples)
        look = self._look(last)
        # The interval once the A/B has ended: a running A/B's would be found again after
        # every sample, and nothing reads it before the end.
        if decision is not Decision.PENDING and look.ci_pct is None:
            look = self._judged[(last, set_aside)] = _Look(look.change_pct, self._interval(last), look.log_e)
        ci = (nan, nan) if look.ci_pct is None else look.ci_pct
        return Confirmation(decision, look.change_pct, ci, min(1.0, float(np.exp(-best))), samples)
