"""Interleaved A/B that stops once the answer is decided (`perfline ab --pairs auto`, a
tracker's confirmation; a bisection's confirmation looks after every pair instead, with
the e-process of `stats.anytime_t`).

Looking at the data after every pair and stopping when the test passes would find a
"change" in no change far more often than alpha says. Here the pairs are looked at on
a fixed, growing schedule (6, 9, 14, 21, ... up to the maximum), and each look is judged
at the nominal level of a group-sequential boundary that spends alpha over the looks
(`stats.spending`, Pocock type, found by numerical integration): the chance that any
look errs is then alpha, not less, as Bonferroni's alpha/looks gave. The interval of a
look is a repeated confidence interval, from the boundary that spends 1 - confidence,
so it covers whichever look stopped. A look decides when the verdict is not
`inconclusive`; the last look always ends the test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfline.records.metric import Metric
from perfline.stats.spending import Boundary, Spending, boundary, fractions_of

if TYPE_CHECKING:
    from perfline.stats.two_sample import Comparison

# The first look: the paired t interval is usable from here, and a big change (a
# tunable that halves throughput) is decided at once.
FIRST_LOOK = 6
# Each look has 1.5x the pairs of the one before: never more than half again the pairs a
# decision needed.
LOOK_GROWTH = 1.5
DEFAULT_MAX_PAIRS = 30
# A count (stats.counted) is looked at after 2 pairs too: its noise is measured from
# them, and where it is ~0 that look decides. Its looks split alpha equally (Bonferroni:
# the spending boundary is computed for the timed looks).
COUNTED_FIRST_LOOK = 2
# Pocock-type spending keeps about the same level at every look, so a large change stops
# the test at its first looks; O'Brien-Fleming's spends almost nothing there (a nominal
# 3e-13 at a first look of 4 a side), which cost the bisection's confirmation 30% more
# runs when it used these plans (docs/bisect.md, Confirmation).
SPENDING = Spending.POCOCK


@dataclass(frozen=True)
class SequentialPlan:
    looks: tuple[int, ...]  # pair counts at which the comparison is made
    alpha: float  # of the whole test
    confidence: float  # of the whole test's interval
    spending: Spending = SPENDING

    @classmethod
    def up_to(
        cls, max_pairs: int, alpha: float, confidence: float = 0.95, *, first: int = FIRST_LOOK,
        growth: float = LOOK_GROWTH,
    ) -> SequentialPlan:
        """Looks at `first`, then `growth` times the one before, and at `max_pairs`."""
        if max_pairs < first:
            raise ValueError(f"at least {first} pairs are needed for a first look")
        looks: list[int] = []
        n = first
        while n < max_pairs:
            looks.append(n)
            n = max(math.ceil(n * growth), n + 1)
        looks.append(max_pairs)
        return cls(tuple(looks), alpha, confidence)

    def look(self, pairs: int) -> int:
        """The index of the last look at or before `pairs` (the first when none)."""
        return max(sum(n <= pairs for n in self.looks) - 1, 0)

    def _boundary(self, level: float) -> Boundary:
        return boundary(fractions_of(self.looks), level, self.spending)

    def one_sided_alpha(self, pairs: int) -> float:
        """The nominal level of a one-sided test at the look of `pairs`."""
        return self._boundary(self.alpha).nominal[self.look(pairs)]

    def alpha_at(self, pairs: int) -> float:
        """The nominal level of a two-sided test at the look of `pairs` (alpha/2 a side)."""
        return 2.0 * self._boundary(self.alpha / 2.0).nominal[self.look(pairs)]

    def confidence_at(self, pairs: int) -> float:
        """The level of the look's two-sided interval: (1 - confidence)/2 spent a side."""
        return 1.0 - 2.0 * self._boundary((1.0 - self.confidence) / 2.0).nominal[self.look(pairs)]

    def judge(self, base: Sequence[float], other: Sequence[float], metric: Metric, floor_pct: float) -> Comparison:
        """The paired comparison of one look, at that look's alpha and confidence."""
        # Imported here: scipy costs a second at start-up and only the looks need it.
        from perfline.stats.counted import compare_counted, counted_floor
        from perfline.stats.two_sample import compare

        if metric.counted:
            share = len(self.looks_of(metric))
            return compare_counted(base, other, metric, alpha=self.alpha / share,
                                   confidence=1 - (1 - self.confidence) / share, floor_pct=counted_floor(floor_pct))
        pairs = min(len(base), len(other))
        return compare(base, other, metric, alpha=self.alpha_at(pairs), confidence=self.confidence_at(pairs),
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
        levels = ", ".join(f"{self.alpha_at(n):.2g}" for n in self.looks)
        return (f"--pairs auto stopped after {pairs} pairs; looks at {looks} pairs at α {levels} "
                f"(a {self.spending.value}-type α-spending boundary), this look with a "
                f"{100 * self.confidence_at(pairs):.4g}% interval, so the whole test errs at α={self.alpha:g} "
                "whenever it stopped (docs/statistics.md, sequential A/B)")
