"""The daily summary's facts, gathered per tracker (rendered by report.daily)."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from perfline.report.daily import DailySummary, TrackerDay
from perfline.report.tracking import draw_graph
from perfline.store import Store
from perfline.track.repository import local_repo_here
from perfline.track.status import tracker_states
from perfline.track.tracker_file import load_tracker

Notify = Callable[[str], None]


def daily_summary(store: Store, names: list[str], since: datetime, notify: Notify) -> DailySummary:
    days = []
    for state in tracker_states(store, names, notify):
        name = state.tracker.name
        changed = [r for r in store.regressions(tracker=name) if r.updated_at >= since]
        graph = None
        if state.numbers:
            _, _, history = local_repo_here(store, load_tracker(Path(state.tracker.file)))
            buffer = io.BytesIO()
            draw_graph(name, state.numbers, store.regressions(tracker=name),
                       {c.sha: i for i, c in enumerate(history)}, buffer)
            graph = buffer.getvalue()
        days.append(TrackerDay(state, [n for n in state.numbers if n.tested_at >= since], changed, graph))
    return DailySummary(since, days)
