"""A series as the browser draws it: one point per commit (or per run without commits),
its mean and spread, the regressions' change points and culprits, downsampled when long.

Points are in the order their first run started: a tracker tests oldest first, so this
is the branch's order without asking git, which keeps the API fast (docs/web.md). For
that reason bisection probes are left out, as from every series in time order
(analysis.series): measured after the range's ends, they would be drawn after them.

The points are columns (one array per field, as uPlot draws them): a 10,000-point
series is then a few hundred kilobytes that encode and parse fast.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime
from typing import Any

from perfline.analysis.series import BISECT_LABEL
from perfline.git import Commit
from perfline.store import Regression, Store
from perfline.store.dashboard import SeriesRow
from perfline.web.series_names import name_series

# Beyond this many points a series is cut into equal buckets, each drawn as its mean
# with the lowest and highest value in it: a screen shows no more anyway.
DEFAULT_MAX_POINTS = 2000
_EPOCH = datetime(1970, 1, 1)


def series_json(store: Store, metric: str, case_key: str | None, machine_id: str | None,
                since: datetime | None = None, max_points: int = DEFAULT_MAX_POINTS) -> dict[str, Any]:
    """The metric's series with its unit, what every series shares (`common`), and each
    series' `name`: the parameters that vary between them (series_names)."""
    groups: dict[tuple[str, str], list[SeriesRow]] = defaultdict(list)
    for row in store.series_rows(metric, case_key, machine_id, since):
        label = row[5]
        if not (label and BISECT_LABEL.fullmatch(label)):
            groups[(row[1], row[2])].append(row)
    regressions = store.regressions(metric=metric)
    keys = sorted(groups)
    common, names = name_series([(case, groups[(case, machine)][0][3]) for case, machine in keys])
    points = {key: _points(groups[key]) for key in keys}
    # Each point's author and date where a screen shows each commit: the store is asked
    # for at most 2,000 commits (500 a query), not for a 10,000-point series' (50 ms).
    commits = _commits(store, {p[1] for found in points.values() if len(found) <= min(max_points, DEFAULT_MAX_POINTS)
                                for p in found if p[1]})
    out = []
    for (case, machine), name in zip(keys, names, strict=True):
        found = points[(case, machine)]
        marks = _marks(found, [r for r in regressions if r.case_key == case and r.machine_id == machine])
        size = max(1, -(-len(found) // max_points))  # ceil: buckets of `size` points
        columns = _columns(found if size == 1 else _buckets(found, size), commits, bucketed=size > 1)
        out.append({"name": name, "case": case, "machine_id": machine, "hostname": groups[(case, machine)][0][3],
                    "points_total": len(found), "downsampled": size > 1, "bucket": size, "points": columns,
                    "changes": [{**m, "x": m["x"] // size, "from": m["from"] // size} for m in marks]})
    unit, direction = store.metric_unit(metric) or ("", "lower")
    return {"metric": metric, "unit": unit, "direction": direction, "common": common, "series": out}


# A point: [first run's time (naive UTC), commit, label, run ids, values].
Point = tuple[datetime, str | None, str | None, list[int], list[float]]


def _points(rows: list[SeriesRow]) -> list[Point]:
    """One point per commit when every run names one, else one per run, in the order
    of their first run."""
    by_commit = all(r[4] for r in rows)
    points: dict[object, Point] = {}
    for run_id, _, _, _, commit, label, started_at, value in rows:
        key = commit if by_commit else run_id
        point = points.get(key)
        if point is None:
            points[key] = (started_at, commit, label, [run_id], [value])
            continue
        if point[3][-1] != run_id:
            point[3].append(run_id)
        point[4].append(value)
    return list(points.values())  # rows come oldest run first, so points do too


def _buckets(points: list[Point], size: int) -> list[Point]:
    """Consecutive points merged `size` at a time (their runs: the first 20), each
    named by its first point's commit."""
    merged = []
    for start in range(0, len(points), size):
        bucket = points[start:start + size]
        merged.append((bucket[0][0], bucket[0][1], bucket[0][2],
                       [run for p in bucket for run in p[3]][:20], [v for p in bucket for v in p[4]]))
    return merged


def _columns(points: list[Point], commits: dict[str, Commit], bucketed: bool) -> dict[str, list[Any]]:
    """A bucket is named by its first commit but has no commit, subject, author or date
    of its own."""
    facts = [None if bucketed else commits.get(p[1] or "") for p in points]
    return {
        "name": [(p[1] or "")[:12] or f"run {p[3][0]}" for p in points],
        "commit": [None if bucketed else p[1] for p in points],
        "subject": [c.subject if c else None for c in facts],
        "author": [c.author if c else None for c in facts],
        "date": [c.date.isoformat() if c and c.date else None for c in facts],
        "label": [p[2] for p in points],
        # SQLite gives naive UTC, PostgreSQL aware times.
        "time": [p[0].timestamp() if p[0].tzinfo else (p[0] - _EPOCH).total_seconds() for p in points],
        "runs": [p[3] for p in points],
        "mean": [sum(p[4]) / len(p[4]) for p in points],
        "min": [min(p[4]) for p in points],
        "max": [max(p[4]) for p in points],
        "sd": [_sd(p[4]) for p in points],
        "n": [len(p[4]) for p in points],
    }


def _sd(values: list[float]) -> float:
    """Sample standard deviation; 0 for one value (statistics.stdev computes in exact
    fractions, a hundred times slower over a long series)."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _marks(points: list[Point], regressions: list[Regression]) -> list[dict[str, Any]]:
    """Each regression between the points of its runs before and after the change
    (`from`, `x`), with its culprits."""
    index = {run: i for i, p in enumerate(points) for run in p[3]}
    return [{"x": index[r.after_run_id], "from": index.get(r.before_run_id, index[r.after_run_id]), "id": r.id,
             "kind": r.kind, "status": r.status, "change_pct": r.change_pct, "culprit": r.culprit,
             "culprit_subject": r.culprit_subject, "culprits": culprits(r)}
            for r in regressions if r.after_run_id in index]


def culprits(r: Regression) -> list[dict[str, str | None]]:
    """The commits a regression was narrowed to, as a list: the culprit, or the range a
    bisection ended on (a commit next to the change could not be built or run), each
    with why it is there."""
    if r.culprit:
        return [{"commit": r.culprit, "subject": r.culprit_subject, "why": None}]
    return [{"commit": c.sha, "subject": c.subject, "why": c.why} for c in r.culprits]


def _commits(store: Store, shas: set[str]) -> dict[str, Commit]:
    """The points' commits as the store kept them when a tracker first saw them (subject,
    author, date: no git needed); the subject the daily numbers hold for the rest."""
    kept = store.stored_commits(shas)
    for t in store.trackers():
        for n in store.daily_numbers(t.name):
            if n.commit in shas and n.commit not in kept:
                kept[n.commit] = Commit(n.commit, n.subject, "", None)
    return kept
