"""A tracker's state as `track status`, the daily report and the dashboard show it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from perfline.analysis.series import Series
from perfline.records.metric import Direction
from perfline.report.tracking import SeriesNoise, TrackerState
from perfline.store import Store
from perfline.track.budget import Budget
from perfline.track.judging import open_regressions, series_noise, tracker_series
from perfline.track.machines import measuring
from perfline.track.repository import local_repo_here
from perfline.track.testing import builder_for, cases, pending
from perfline.track.tracker_file import load_tracker

Notify = Callable[[str], None]


def tracker_states(store: Store, names: list[str], notify: Notify) -> list[TrackerState]:
    """Per tracker: tested and pending commits (from its file and the store), open
    regressions, the budget left today, its daily numbers and each series' learned noise."""
    now = datetime.now(UTC)
    states = []
    for name in names:
        tracker = store.tracker(name)
        spec = load_tracker(Path(tracker.file))
        repo, ref, history = local_repo_here(store, spec)
        wanted = {(c.benchmark, c.key) for c in cases(spec)}
        where = measuring(store, spec)
        done = store.completed_cases(name, where.machine_ids)
        tested = [c.sha for c in history if wanted <= done.get(c.sha, set())]
        todo = pending(spec, repo, history, ref, store, where, builder_for(spec, repo, notify), now)
        states.append(TrackerState(tracker, tested[-1] if tested else None, len(tested), len(todo),
                                   len(open_regressions(store, name)),
                                   Budget.today(store, name, spec.runs_per_day, now).left(),
                                   store.daily_numbers(name), _noise(tracker_series(store, spec, repo, where, history))))
    return states


def _noise(tracked: list[Series]) -> tuple[SeriesNoise, ...]:
    found = []
    for series in tracked:
        if series.order == "commit" and series.metric.direction is not Direction.NEUTRAL:
            noise = series_noise(series)
            found.append(SeriesNoise(series.benchmark, series.case_key, series.metric.name, noise.between_pct,
                                     noise.commits))
    return tuple(found)
