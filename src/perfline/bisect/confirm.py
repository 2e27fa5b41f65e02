"""Confirmation of a bisected culprit: an A/B of fresh samples against its parent.

The posterior rests on a model: one clean step, the same noise everywhere, a machine
that does not drift while the bisection runs. The A/B checks the answer without that
model: a plain two-sample test of the culprit's samples against its parent's, one-sided
in the direction the bisection found, that uses no sample of any other commit and no
estimate of the levels.

Its samples are **fresh**: taken after the posterior reached its confidence, none of
those that made the bisection choose the pair (a test on those passes more easily than
their noise says: on A/A data the old A/B that reused them confirmed 15% of the time at
its nominal 5%). Every wrong answer of the bisection is a pair of commits on the same
side of the step, i.e. an A/A pair, so the chance that a wrong culprit is confirmed is
at most the A/B's alpha, 0.01, whatever misled the posterior.

The samples are taken alternately (ABBA: a linear drift adds the same to both sides at
every even count a side, and a third of one sample's drift at an odd one) and looked at
on a fixed schedule (`stats.sequential.SequentialPlan`, as `ab --pairs auto`): at 4, 6,
9, 14, 21 and 32 samples a side. Each look is Welch's test of the logs (Yuen's
trimmed-mean form when an outlier is seen) judged at
the nominal level of a Pocock-type alpha-spending boundary (`stats.spending`): the A/B
confirms an A/A pair at most at alpha whichever look stopped it, and spends all of it
rather than the share Bonferroni's alpha / looks left unused. The A/B can also be
stopped from outside (the bisection stops it when its posterior leaves the pair); a
test stopped early without confirming can only confirm less often.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy.special import stdtr, stdtrit

from perfline.bisect.posterior import percent
from perfline.stats.sequential import SequentialPlan
from perfline.stats.two_sample import TRIM_OUTLIER_Z, outlier_indexes, trimmed_difference

# Yuen's trimmed-mean test when an outlier is seen: from five samples a side on, one 10x
# outlier is trimmed away instead of inflating the variance until nothing is significant.
# On clean samples Welch's test: trimming one of five samples a side costs degrees of
# freedom the few samples of a look cannot spare (the A/B at 2% noise took 16.7 runs
# trimmed, 14.3 not), and Yuen's approximation ran above its level at the boundary's
# nominal levels (1.27% of 1500 A/A pairs, s.e. 0.29, against 0.87% for Welch's).
TRIM = 0.2
# The error rate of the rest of the tool (compare, ab, change points).
ALPHA = 0.01
# Of the reported interval, over all the looks together.
CONFIDENCE = 0.95
# Samples a side at each look: from two ABBA blocks a side, where a 5% step in 1% noise is
# decided, 1.5x the look before up to 32, where the last look has 95% power against a step
# 1.3 times the noise's sd (5% in 3.8%). A maximum planned on the step and the noise the
# bisection estimated was tried and dropped: the posterior stops soonest when its samples
# happen to look quiet, so their scale is low exactly when the plan needs it: of 200
# bisections at 2% noise, 19 right answers ended not-confirmed with plans of 4-12 a side
# (the noise estimated as low as 0.95%). The fixed plan costs 1-2 runs more.
LOOKS = SequentialPlan.up_to(32, ALPHA, CONFIDENCE, first=4)


def _trim(a: np.ndarray, b: np.ndarray) -> float:
    """Trim when some log value is an outlier among both sides, each centred on its own
    median (as `compare` chooses its trimmed test): the choice looks at the pooled
    shape only, not at which side a value came from."""
    pooled = np.concatenate([a - np.median(a), b - np.median(b)])
    return TRIM if outlier_indexes(pooled, TRIM_OUTLIER_Z) else 0.0


class Decision(StrEnum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    NOT_CONFIRMED = "not-confirmed"


@dataclass(frozen=True)
class Confirmation:
    decision: Decision
    change_pct: float  # culprit vs parent, trimmed means of the logs, at the latest look
    ci_pct: tuple[float, float]  # a repeated interval: 95% whatever look stopped the A/B
    # One-sided in the direction the bisection found, the look's p-value times alpha over
    # the look's nominal level: the A/B confirms when it is below alpha.
    p_value: float
    samples: int  # fresh samples at the parent and the culprit together


@dataclass(frozen=True)
class _Look:
    change_pct: float
    ci_pct: tuple[float, float]
    p_value: float  # scaled to the whole test's alpha
    crossed: bool  # the look's statistic crossed its boundary


class ABConfirmation:
    """A/B of `culprit` against `parent` on the samples `observe` is given, which must
    be taken after the bisection chose the pair.

    `increase` is the direction the bisection found (the culprit's level is higher).
    A look is judged on the first `look` samples of each
    side; the A/B is confirmed at the first look that passes, not confirmed at the last.
    """

    def __init__(
        self,
        parent: int,
        culprit: int,
        increase: bool,
        looks: SequentialPlan = LOOKS,
    ) -> None:
        if parent == culprit:
            raise ValueError("parent and culprit must differ")
        self.parent, self.culprit, self.increase, self.looks = parent, culprit, increase, looks
        self._last: int | None = None
        self._samples: dict[int, list[float]] = {parent: [], culprit: []}
        self._judged: dict[int, _Look] = {}  # per look; its samples never change
        self._stopped = False

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

    def _taken(self) -> int:
        return min(len(self._samples[self.parent]), len(self._samples[self.culprit]))

    def spent(self) -> float:
        """The alpha the looks taken so far spent: what confirming an A/A pair by now
        could have cost at most."""
        return self.looks.spent_by(self._taken())

    def ran_out(self) -> bool:
        """Whether the A/B reached its last look."""
        return self._taken() >= self.looks.looks[-1]

    def taken(self, commit: int) -> list[float]:
        """The A/B's samples at `commit` (none unless it is the parent or the culprit)."""
        return list(self._samples.get(commit, ()))

    def next_probe(self) -> int | None:
        """The side with fewer samples; on a tie the side measured last, which makes ABBA."""
        if self.result().decision is not Decision.PENDING:
            return None
        a, b = len(self._samples[self.parent]), len(self._samples[self.culprit])
        if a != b:
            return self.parent if a < b else self.culprit
        return self._last if self._last is not None else self.parent

    def _look(self, n: int) -> _Look:
        if n not in self._judged:
            a = np.log(np.asarray(self._samples[self.parent][:n], dtype=float))
            b = np.log(np.asarray(self._samples[self.culprit][:n], dtype=float))
            difference, se, df = trimmed_difference(a, b, _trim(a, b))
            # No spread at all (se 0): no t, no decision, as scipy.stats.ttest_ind says.
            t = difference / se if se else float("nan")
            nominal = float(stdtr(df, -t if self.increase else t))
            level = self.looks.one_sided_alpha(n)
            # Scaled to the whole test's alpha: below it exactly when the look confirms.
            p = min(1.0, nominal * self.looks.alpha / level)
            half = float(stdtrit(df, (1 + self.looks.confidence_at(n)) / 2)) * se
            crossed = nominal < level
            self._judged[n] = _Look(percent(difference), (percent(difference - half), percent(difference + half)),
                                    p, crossed)
        return self._judged[n]

    def result(self) -> Confirmation:
        taken = self._taken()
        samples = len(self._samples[self.parent]) + len(self._samples[self.culprit])
        nan = float("nan")
        latest, decision = _Look(nan, (nan, nan), nan, False), Decision.PENDING
        for n in self.looks.looks:
            if n > taken:
                break
            latest = self._look(n)
            if latest.crossed:
                decision = Decision.CONFIRMED
                break
        else:
            decision = Decision.NOT_CONFIRMED
        if self._stopped and decision is Decision.PENDING:
            decision = Decision.NOT_CONFIRMED
        return Confirmation(decision, latest.change_pct, latest.ci_pct, latest.p_value, samples)
