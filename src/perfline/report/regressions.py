"""Regression records and change points as the terminal and `--json` show them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from perfline.analysis.series import Series
from perfline.report.series_view import KIND_STYLE

if TYPE_CHECKING:
    from perfline.stats.changepoint import ChangePoint
    from perfline.store import Regression


def regression_json(r: Regression) -> dict[str, Any]:
    return {
        "id": r.id, "metric": r.metric, "benchmark": r.benchmark, "case": r.case_key,
        "machine_id": r.machine_id, "before_run": r.before_run_id, "after_run": r.after_run_id,
        "kind": r.kind, "change_pct": r.change_pct, "ci_pct": list(r.ci_pct),
        "strength": r.strength, "status": r.status, "note": r.note,
        "detected_at": r.detected_at.isoformat(), "updated_at": r.updated_at.isoformat(),
        "tracker": r.tracker, "good": r.good, "bad": r.bad, "bisection": r.bisection_id,
        "culprit": r.culprit, "culprit_subject": r.culprit_subject,
        "culprits": [{"sha": c.sha, "subject": c.subject, "why": c.why} for c in r.culprits],
    }


def culprit_range(r: Regression) -> str:
    """A range of culprits in one line, as git bisect says it; "" without one."""
    if not r.culprits:
        return ""
    return f"any of {len(r.culprits)}: " + " ".join(c.sha[:12] for c in r.culprits)


def regressions_table(listed: Sequence[Regression]) -> Table:
    table = Table(title="regressions", title_justify="left")
    for name in ("id", "status", "kind", "metric", "case", "runs", "change [95% CI]", "culprit", "note"):
        table.add_column(name, overflow="fold")
    for r in listed:
        culprit = f"{r.culprit[:12]} {r.culprit_subject}" if r.culprit else culprit_range(r)
        table.add_row(str(r.id), r.status, Text(r.kind, style=KIND_STYLE[r.kind]), r.metric, r.case_key,
                      f"{r.before_run_id} → {r.after_run_id}",
                      f"{r.change_pct:+.1f}% [{r.ci_pct[0]:+.1f}, {r.ci_pct[1]:+.1f}]", culprit, r.note or "")
    return table


# What `detect` found: each change point with the record it opened or matched.
Detected = tuple[Series, "ChangePoint", "Regression", bool]


def detected_json(found: Sequence[Detected]) -> list[dict[str, Any]]:
    return [regression_json(r) | {"new": created} for _, _, r, created in found]


def detected_table(found: Sequence[Detected]) -> Table:
    table = Table(title="change points", title_justify="left")
    for column_name in ("id", "metric", "case", "machine", "between runs", "kind", "change [95% CI]", "strength", ""):
        table.add_column(column_name)
    for series, change, regression, created in found:
        table.add_row(
            str(regression.id), series.metric.name, series.case_key, series.hostname,
            f"{regression.before_run_id} → {regression.after_run_id}",
            Text(regression.kind, style=KIND_STYLE[regression.kind]),
            f"{change.change_pct:+.1f}% [{change.ci_pct[0]:+.1f}, {change.ci_pct[1]:+.1f}]",
            f"{change.strength:.1f}",
            "new" if created else "known",
        )
    return table


def csv_changes_json(changes: Sequence[ChangePoint], n: int) -> dict[str, Any]:
    """`detect --csv --json`: the change points of one column."""
    return {
        "change_points": [{"index": c.index, "change_pct": c.change_pct, "ci_pct": list(c.ci_pct)} for c in changes],
        "n": n,
    }


def csv_changes_view(path: Path, column: str, changes: Sequence[ChangePoint], n: int) -> Group:
    lines = [Text(f"{path} column {column!r}: {n} points, {len(changes)} change point(s)")]
    lines += [Text(f"  at index {c.index}: {c.change_pct:+.2f}% [{c.ci_pct[0]:+.2f}, {c.ci_pct[1]:+.2f}], "
                   f"strength {c.strength:.1f}") for c in changes]
    return Group(*lines)
