"""Statistics: per-run summaries here; `compare`, `changepoint` and `profile_diff` are
imported from their modules, so that commands which only list runs do not load scipy."""

from perfline.stats.summary import Summary, summarize

__all__ = ["Summary", "summarize"]
