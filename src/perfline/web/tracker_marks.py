"""What the front page's chart of a tracker's daily number marks, as `track graph`'s PNG
does: each commit range a change was found in, shaded, and the culprits it was narrowed
to, each at its own commit.

x is the commit's first-parent position from the tracker's `since` (the daily numbers
store it). The ends of a range are tested commits, so their positions are known; a
culprit's is the range's start plus its index in the bisection's commits, which are
that range's first-parent commits in order (bisect.session), so no git is needed.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from perfline.bisect.merges import entered_at
from perfline.store import Regression, Store
from perfline.store.bisections import BisectionNotFound
from perfline.store.trackers import DailyNumber
from perfline.web.series_data import culprits


def tracker_marks(store: Store, tracker: str, numbers: list[DailyNumber]) -> list[dict[str, Any]]:
    """One mark per commit range with every regression (or improvement) found there."""
    positions = {n.commit: n.position for n in numbers}
    ranges: dict[tuple[str, str], list[Regression]] = defaultdict(list)
    for r in store.regressions(tracker=tracker):
        if r.good is not None and r.bad is not None and r.good in positions and r.bad in positions:
            ranges[(r.good, r.bad)].append(r)
    marks = []
    for (good, bad), found in sorted(ranges.items(), key=lambda kv: positions[kv[0][0]]):
        found.sort(key=lambda r: r.id)
        named = next((r for r in found if r.culprit or r.culprits), found[0])
        marks.append({
            "from": positions[good], "to": positions[bad], "good": good, "bad": bad,
            "kind": "regression" if any(r.kind == "regression" for r in found) else found[0].kind,
            "changes": [{"id": r.id, "metric": r.metric, "kind": r.kind, "change_pct": r.change_pct,
                         "status": r.status} for r in found],
            "culprits": [{**c, "position": _position(store, named, str(c["commit"]), positions[good])}
                         for c in culprits(named)],
        })
    return marks


def _position(store: Store, r: Regression, commit: str, start: int) -> int | None:
    """The culprit's first-parent position, from its bisection's commits (one inside a
    branch a merge brought in: its merge's); None when the bisection is gone or does not
    hold it."""
    if r.bisection_id is None:
        return None
    try:
        bisection = store.bisection(r.bisection_id)
    except BisectionNotFound:
        return None
    commits, at = bisection.spec.commits, entered_at(commit, bisection)
    return start + commits.index(at) if at is not None and commits[0] == r.good else None
