"""Confirmation of a bisected culprit: an A/B against its parent.

The posterior rests on a model: one clean step, the same noise everywhere, a machine
that does not drift while the bisection runs. The A/B checks the answer without that
model: a plain two-sample test of the culprit's samples against its parent's, one-sided
in the direction the bisection found, that uses no sample of any other commit and no
estimate of the levels.

It uses every sample already taken at the two commits and takes only the ones still
missing, alternately (ABBA: a linear drift then adds the same to both sides). The end of
a bisection measures these two commits anyway, so most of the A/B's samples are already
there when the posterior reaches its confidence. They are the samples that made the
bisection choose the pair, so the A/B is not an independent replication: what it adds
is the test without the model, which rejects a pair whose own samples do not differ
(for example when the levels the model learnt elsewhere drifted).
"""

from __future__ import annotations

from collections.abc import Iterable
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
    samples: int  # at the parent and the culprit together, the ones the test used


class ABConfirmation:
    """A/B of `culprit` against `parent`, on `samples` (commit, value) and what follows.

    `increase` is the direction the bisection found (the culprit's level is higher).
    The test is one-sided at `alpha`: the bisection already stands at 99.5%, and the A/B
    is there to catch a drift or a change that is not a step, which show up as no
    difference or the wrong sign, not as a borderline p-value. It is judged once both
    sides have `min_samples`, and gives up when both have `max_samples`.
    """

    def __init__(
        self,
        parent: int,
        culprit: int,
        increase: bool,
        samples: Iterable[tuple[int, float]] = (),
        *,
        min_samples: int = 2,
        max_samples: int = 8,
        alpha: float = 0.05,
    ) -> None:
        if parent == culprit:
            raise ValueError("parent and culprit must differ")
        self.parent, self.culprit, self.increase = parent, culprit, increase
        self.min_samples, self.max_samples, self.alpha = max(min_samples, 2), max_samples, alpha
        self._last: int | None = None
        self._samples: dict[int, list[float]] = {parent: [], culprit: []}
        for commit, value in samples:
            if commit in self._samples:
                self.observe(commit, value)

    def observe(self, commit: int, value: float) -> None:
        if commit not in self._samples:
            raise ValueError(f"commit {commit} is neither the parent nor the culprit")
        if not value > 0 or not np.isfinite(value):
            raise ValueError(f"sample values must be positive and finite, got {value!r}")
        self._samples[commit].append(value)
        self._last = commit

    def next_probe(self) -> int | None:
        """The side with fewer samples; on a tie the side measured last, which makes ABBA."""
        if self.result().decision is not Decision.PENDING:
            return None
        a, b = len(self._samples[self.parent]), len(self._samples[self.culprit])
        if a != b:
            return self.parent if a < b else self.culprit
        return self._last if self._last is not None else self.parent

    def result(self) -> Confirmation:
        a = np.log(np.asarray(self._samples[self.parent], dtype=float))
        b = np.log(np.asarray(self._samples[self.culprit], dtype=float))
        if min(len(a), len(b)) < self.min_samples:
            nan = float("nan")
            return Confirmation(Decision.PENDING, nan, (nan, nan), nan, len(a) + len(b))
        test = stats.ttest_ind(b, a, equal_var=False, trim=TRIM)
        ci = test.confidence_interval(0.95)
        t_toward = test.statistic if self.increase else -test.statistic
        p = float(stats.t.sf(t_toward, test.df))
        diff = float(stats.trim_mean(b, TRIM) - stats.trim_mean(a, TRIM))
        if p < self.alpha:
            decision = Decision.CONFIRMED
        elif min(len(a), len(b)) >= self.max_samples:
            decision = Decision.NOT_CONFIRMED
        else:
            decision = Decision.PENDING
        change = (percent(ci.low), percent(ci.high))
        return Confirmation(decision, percent(diff), change, p, len(a) + len(b))
