"""A series as the browser draws it: one point per commit (or per run without commits),
its mean and spread, the regressions' change points and culprits, downsampled when long.

Points are in the order their first run started: a tracker tests oldest first, so this
is the branch's order without asking git, which keeps the API fast (docs/web.md). For
that reason bisection probes are left out, as from every series in time order
(analysis.series): measured after the range's ends, they would be drawn after them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from perfline.analysis.series import BISECT_LABEL
from perfline.store import Regression, Store
from perfline.store.dashboard import SeriesRow

# Beyond this many points a series is cut into equal buckets, each drawn as its mean
# with the lowest and highest value in it: a screen shows no more anyway.
DEFAULT_MAX_POINTS = 2000


@dataclass
class _Point:
    key: str
    commit: str | None
    label: str | None
    started_at: datetime
    runs: list[int]
    values: list[float]


def series_json(store: Store, metric: str, case_key: str | None, machine_id: str | None,
                since: datetime | None = None, max_points: int = DEFAULT_MAX_POINTS) -> dict[str, Any]:
    rows = [r for r in store.series_rows(metric, case_key, machine_id, since)
            if not (r.label and BISECT_LABEL.fullmatch(r.label))]
    groups: dict[tuple[str, str], list[SeriesRow]] = defaultdict(list)
    for row in rows:
        groups[(row.case_key, row.machine_id)].append(row)
    regressions = [r for r in store.regressions() if r.metric == metric]
    subjects = _subjects(store)
    out = []
    for (case, machine), members in sorted(groups.items()):
        points = _points(members)
        marks = _marks(points, [r for r in regressions if r.case_key == case and r.machine_id == machine])
        shown = _downsample(points, max_points)
        out.append({
            "case": case, "machine_id": machine, "hostname": members[0].hostname, "points_total": len(points),
            "downsampled": len(shown) < len(points),
            "points": [{"x": i, "name": p["name"], "commit": p["commit"], "subject": subjects.get(p["commit"] or ""),
                        "label": p["label"], "time": p["time"], "runs": p["runs"], "mean": p["mean"],
                        "min": p["min"], "max": p["max"], "n": p["n"]} for i, p in enumerate(shown)],
            "changes": marks if len(shown) == len(points) else _rescale(marks, len(points), len(shown)),
        })
    return {"metric": metric, "series": out}


def _points(rows: list[SeriesRow]) -> list[_Point]:
    """One point per commit when every run names one, else one per run."""
    by_commit = all(r.kernel_commit for r in rows)
    points: dict[str, _Point] = {}
    for r in rows:
        key = r.kernel_commit if by_commit and r.kernel_commit else str(r.run_id)
        point = points.get(key)
        if point is None:
            point = points[key] = _Point(key, r.kernel_commit, r.label, r.started_at, [], [])
        if r.run_id not in point.runs:
            point.runs.append(r.run_id)
        point.values.append(r.value)
    return sorted(points.values(), key=lambda p: (p.started_at, p.runs[0]))


def _downsample(points: list[_Point], max_points: int) -> list[dict[str, Any]]:
    size = max(1, -(-len(points) // max_points))  # ceil: buckets of `size` points
    out = []
    for start in range(0, len(points), size):
        bucket = points[start:start + size]
        values = [v for p in bucket for v in p.values]
        first = bucket[0]
        out.append({"name": (first.commit or "")[:12] or f"run {first.runs[0]}",
                    "commit": first.commit if len(bucket) == 1 else None, "label": first.label,
                    "time": first.started_at.isoformat(), "runs": [r for p in bucket for r in p.runs][:20],
                    "mean": sum(values) / len(values), "min": min(values), "max": max(values), "n": len(values)})
    return out


def _marks(points: list[_Point], regressions: list[Regression]) -> list[dict[str, Any]]:
    """Each regression at the point of its first run after the change."""
    index = {run: i for i, p in enumerate(points) for run in p.runs}
    return [{"x": index[r.after_run_id], "id": r.id, "kind": r.kind, "status": r.status, "change_pct": r.change_pct,
             "culprit": r.culprit, "culprit_subject": r.culprit_subject}
            for r in regressions if r.after_run_id in index]


def _rescale(marks: list[dict[str, Any]], total: int, shown: int) -> list[dict[str, Any]]:
    size = max(1, -(-total // max(shown, 1)))
    return [{**m, "x": m["x"] // size} for m in marks]


def _subjects(store: Store) -> dict[str, str]:
    """Commit subjects the trackers stored with their numbers (no git needed)."""
    return {n.commit: n.subject for t in store.trackers() for n in store.daily_numbers(t.name)}
