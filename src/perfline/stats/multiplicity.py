"""Many metrics in one table: controlling the false discovery rate across them.

A comparison table tests the benchmark's own metrics and ~25 monitor metrics (CPU
shares, context switches, perf counters), and some benchmarks report a metric per CPU,
per thread or per pair of CPUs (4,032 pairs on 64 CPUs). Each at alpha = 0.01, 21.5% of
tables with no change anywhere showed at least one false `*`. The benchmark's headline
metrics keep alpha each (a benchmark rarely has more than two). All the others form one
family, controlled together with Benjamini–Hochberg at the level given
(analysis.comparison gives it half of alpha beside headline metrics, all of it without):
among the changes the table flags in them, the expected share of false ones is at most
that level, and when nothing changed so is the chance of any flag."""

from __future__ import annotations

import math
from collections.abc import Sequence


def benjamini_hochberg(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Which hypotheses the step-up rule rejects; NaN p-values are never rejected and do
    not count among the tests."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    m = len(tested)
    cutoff = -1.0
    for rank, (p, _) in enumerate(tested, start=1):
        if p <= alpha * rank / m:
            cutoff = p
    return [not math.isnan(p) and p <= cutoff for p in p_values]
