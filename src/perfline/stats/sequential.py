"""Interleaved A/B that stops once the answer is decided (`perfline ab --pairs auto`).

Looking at the data after every pair and stopping when the test passes would find a
"change" in no change far more often than alpha says. Here the pairs are looked at on
a fixed, growing schedule (6, 9, 14, 21, ... up to the maximum), and each look is a
paired comparison at alpha / looks, its interval at 1 - (1 - confidence) / looks.
By Bonferroni's inequality the chance that any look errs is then at most alpha (and the
interval's at most 1 - confidence), whatever the stopping rule made of the data: the
guarantee needs no model of how the looks are correlated, which is also why it is
conservative. A look decides when the verdict is not `inconclusive`; the last look
always ends the test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfline.records.metric import Metric

if TYPE_CHECKING:
    from perfline.stats.two_sample import Comparison

# The first look: the paired t interval is usable from here, and a big change (a
# tunable that halves throughput) is decided at once.
FIRST_LOOK = 6
# Each look has 1.5x the pairs of the one before: few looks (each costs alpha), and
# never more than half again the pairs a decision needed.
LOOK_GROWTH = 1.5
DEFAULT_MAX_PAIRS = 30
# A count (stats.counted) is looked at after 2 pairs too: its noise is measured from
# them, and where it is ~0 that look decides. The extra look takes its share of alpha.
COUNTED_FIRST_LOOK = 2


@dataclass(frozen=True)
class SequentialPlan:
    looks: tuple[int, ...]  # pair counts at which the comparison is made
    alpha: float  # of the whole test
    confidence: float  # of the whole test's interval

    @classmethod
    def up_to(
        cls, max_pairs: int, alpha: float, confidence: float = 0.95, *, first: int = FIRST_LOOK
    ) -> SequentialPlan:
        """Looks at `first`, then 1.5x the one before, and at `max_pairs` (the bisection's
        confirmation looks from 4 samples a side on, unpaired)."""
        if max_pairs < first:
            raise ValueError(f"at least {first} pairs are needed for a first look")
        looks: list[int] = []
        n = first
        while n < max_pairs:
            looks.append(n)
            n = math.ceil(n * LOOK_GROWTH)
        looks.append(max_pairs)
        return cls(tuple(looks), alpha, confidence)

    @property
    def look_alpha(self) -> float:
        return self.alpha / len(self.looks)

    @property
    def look_confidence(self) -> float:
        return 1 - (1 - self.confidence) / len(self.looks)

    def judge(self, base: Sequence[float], other: Sequence[float], metric: Metric, floor_pct: float) -> Comparison:
        """The paired comparison of one look, at that look's alpha and confidence."""
        # Imported here: scipy costs a second at start-up and only the looks need it.
        from perfline.stats.counted import compare_counted, counted_floor
        from perfline.stats.two_sample import compare

        if metric.counted:
            share = len(self.looks_of(metric))
            return compare_counted(base, other, metric, alpha=self.alpha / share,
                                   confidence=1 - (1 - self.confidence) / share, floor_pct=counted_floor(floor_pct))
        return compare(base, other, metric, alpha=self.look_alpha, confidence=self.look_confidence,
                       floor_pct=floor_pct, paired=True)

    def looks_of(self, metric: Metric) -> tuple[int, ...]:
        if metric.counted and self.looks[0] > COUNTED_FIRST_LOOK:
            return (COUNTED_FIRST_LOOK, *self.looks)
        return self.looks

    def done(self, base: Sequence[float], other: Sequence[float], metric: Metric, floor_pct: float) -> bool:
        """Whether to stop after len(base) pairs: the last look, or a look that decided."""
        pairs = min(len(base), len(other))
        if pairs >= self.looks[-1]:
            return True
        if pairs not in self.looks_of(metric):
            return False
        from perfline.stats.two_sample import INCONCLUSIVE

        return self.judge(base[:pairs], other[:pairs], metric, floor_pct).verdict != INCONCLUSIVE

    def note(self, pairs: int) -> str:
        """What a reader of the table must know about the levels it shows."""
        looks = ", ".join(str(n) for n in self.looks)
        return (f"--pairs auto stopped after {pairs} pairs; looks at {looks} pairs, each at "
                f"α={self.look_alpha:.2g} with a {100 * self.look_confidence:.4g}% interval, so the whole test "
                f"errs at most at α={self.alpha:g} whenever it stopped (docs/statistics.md, sequential A/B)")
