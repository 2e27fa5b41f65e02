"""Confirmation of a bisected culprit: an interleaved A/B against its parent.

The posterior rests on a model: one clean step, the same noise everywhere, a machine
that does not drift while the bisection runs. The A/B checks the answer without that
model. It measures parent (A) and culprit (B) afresh in ABBA order, so that a slow drift
of the machine hits both alike, and asks a plain two-sample test whether the culprit
differs from its parent in the direction the bisection found. Only fresh samples count:
the bisection's own samples at these two commits are the ones that made it pick them, so
they would confirm their own selection.

The fresh samples are ordinary samples too; the caller also hands them to the
`Bisection`, which keeps going if they move its posterior.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy import stats

from perfline.bisect.posterior import percent

# Yuen's trimmed-mean test: from five samples a side on, one 10x outlier is trimmed away
# instead of inflating the variance until nothing is significant.
TRIM = 0.2


class Decision(StrEnum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    NOT_CONFIRMED = "not-confirmed"


@dataclass(frozen=True)
class Confirmation:
    decision: Decision
    change_pct: float  # culprit vs parent, trimmed means of the logs
    ci_pct: tuple[float, float]  # 95%
    p_value: float  # one-sided, in the direction the bisection found
    runs: int  # fresh runs taken by the A/B


class ABConfirmation:
    """Interleaved A/B of `culprit` against `parent`; drive it with next_probe/observe.

    `increase` is the direction the bisection found (the culprit's level is higher).
    The test is one-sided at `alpha`: the bisection already stands at 99.5%, and the A/B
    is there to catch a drift or a change that is not a step, which show up as no
    difference or the wrong sign, not as a borderline p-value.
    """

    def __init__(
        self,
        parent: int,
        culprit: int,
        increase: bool,
        *,
        min_pairs: int = 2,
        max_pairs: int = 8,
        alpha: float = 0.05,
    ) -> None:
        if parent == culprit:
            raise ValueError("parent and culprit must differ")
        self.parent, self.culprit, self.increase = parent, culprit, increase
        self.min_pairs, self.max_pairs, self.alpha = min_pairs, max_pairs, alpha
        self._order: list[int] = []
        self._samples: dict[int, list[float]] = {parent: [], culprit: []}

    def observe(self, commit: int, value: float) -> None:
        if commit not in self._samples:
            raise ValueError(f"commit {commit} is neither the parent nor the culprit")
        if not value > 0 or not np.isfinite(value):
            raise ValueError(f"sample values must be positive and finite, got {value!r}")
        self._samples[commit].append(value)
        self._order.append(commit)

    def next_probe(self) -> int | None:
        if len(self._order) % 2 == 0 and self.result().decision is not Decision.PENDING:
            return None
        # ABBA: A B | B A | A B ... a linear drift then adds the same to both sides.
        position = len(self._order)
        first, second = (self.parent, self.culprit) if position // 2 % 2 == 0 else (
            self.culprit,
            self.parent,
        )
        return first if position % 2 == 0 else second

    def result(self) -> Confirmation:
        a = np.log(np.asarray(self._samples[self.parent], dtype=float))
        b = np.log(np.asarray(self._samples[self.culprit], dtype=float))
        runs = len(a) + len(b)
        pairs = min(len(a), len(b))
        # Judged at whole pairs only, so that both sides saw the same stretch of drift.
        if len(a) != len(b) or pairs < max(self.min_pairs, 2):
            nan = float("nan")
            return Confirmation(Decision.PENDING, nan, (nan, nan), nan, runs)
        test = stats.ttest_ind(b, a, equal_var=False, trim=TRIM)
        ci = test.confidence_interval(0.95)
        t_toward = test.statistic if self.increase else -test.statistic
        p = float(stats.t.sf(t_toward, test.df))
        diff = float(stats.trim_mean(b, TRIM) - stats.trim_mean(a, TRIM))
        if p < self.alpha:
            decision = Decision.CONFIRMED
        elif pairs >= self.max_pairs:
            decision = Decision.NOT_CONFIRMED
        else:
            decision = Decision.PENDING
        return Confirmation(decision, percent(diff), (percent(ci.low), percent(ci.high)), p, runs)
