"""Statistics: per-run summaries, comparisons of two samples; change points build on them."""

from perfline.stats.compare import (
    MIN_SAMPLES,
    Comparison,
    compare,
    detectable_change_pct,
    mean_ci_halfwidth_pct,
    outlier_indexes,
)
from perfline.stats.summary import Summary, summarize

__all__ = [
    "MIN_SAMPLES",
    "Comparison",
    "Summary",
    "compare",
    "detectable_change_pct",
    "mean_ci_halfwidth_pct",
    "outlier_indexes",
    "summarize",
]
