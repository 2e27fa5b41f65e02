"""Statistics: summaries now; comparisons and change points build on them."""

from perfline.stats.summary import Summary, summarize

__all__ = ["Summary", "summarize"]
