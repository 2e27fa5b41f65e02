"""Which commits of the branch a tracker tests."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from perfline.git import Commit
from perfline.track.tracker_file import Selection


def selected(selection: Selection, history: list[Commit], tagged: set[str], tested_since: datetime | None,
             now: datetime) -> list[Commit]:
    """The commits `selection` asks for, oldest first. `history`: the first-parent
    commits from `since` (included) to the head; `tagged`: shas of matching tags
    (select: tags); `tested_since`: when the tracker last tested anything (daily)."""
    if not history:
        return []
    head = history[-1]
    if selection.every is not None:
        # Every Nth counted from `since`, so a commit once selected stays selected as the
        # branch grows; the head always, as it is today's number.
        chosen = history[:: selection.every]
        return chosen if chosen[-1] is head else [*chosen, head]
    if selection.tags is not None:
        return [c for c in history if c.sha in tagged]
    assert selection.daily is not None
    hour, minute = map(int, selection.daily.split(":"))
    local = now.astimezone()
    today = datetime.combine(local.date(), time(hour, minute), tzinfo=local.tzinfo)
    # The latest HH:MM that has passed: today's, or yesterday's before it comes.
    due = today if local >= today else today - timedelta(days=1)
    return [head] if tested_since is None or tested_since < due else []
