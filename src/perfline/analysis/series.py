"""Series: the values of one metric for one case on one machine, in commit or time order."""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfline import git
from perfline.records.errors import UserError
from perfline.records.metric import Direction, Metric
from perfline.records.status import RunStatus

if TYPE_CHECKING:
    from perfline.stats.changepoint import ChangePoint
    from perfline.store import RunInfo, RunValues

# The label `perfline bisect` gives the runs it measures (cli/bisect.py).
BISECT_LABEL = re.compile(r"bisect-\d+")


class SeriesError(UserError, ValueError):
    """Bad input for a series (a CSV file, a git repository); the message says where."""


@dataclass(frozen=True)
class Point:
    """One place in a series: a run, or all runs of one commit; keeps every repetition."""

    runs: tuple[RunInfo, ...]
    values: tuple[float, ...]

    @property
    def name(self) -> str:
        """What the x axis shows: the commit, else the label, else the date."""
        first = self.runs[0]
        if first.kernel_commit:
            return first.kernel_commit[:12]
        if first.label:
            return first.label
        return first.started_at.astimezone().strftime("%m-%d %H:%M")


@dataclass(frozen=True)
class Series:
    metric: Metric
    benchmark: str
    case_key: str
    machine_id: str
    hostname: str
    points: list[Point]
    order: str  # "commit" or "time"

    def change_points(self, false_alarm_rate: float = 0.001) -> list[ChangePoint]:
        from perfline.stats.changepoint import (
            detect,  # scipy: loaded only when detecting
        )

        return detect([list(p.values) for p in self.points], false_alarm_rate=false_alarm_rate)


def is_bisection_probe(run: RunInfo) -> bool:
    """A run a bisection measured: `perfline bisect` labels its runs `bisect-<id>`."""
    return run.label is not None and BISECT_LABEL.fullmatch(run.label) is not None


def build_series(found: Iterable[RunValues], repo: Path | None = None) -> list[Series]:
    """Group run values into series. With `repo`, a series whose runs all name a kernel
    commit is ordered by that git history (runs of one commit pooled into one point);
    otherwise each run is a point, in the order the runs started.

    Only completed runs are points: a failed or interrupted run's few repetitions
    measured a run that went wrong. Interleaved runs (the sides of `ab` and the re-runs
    of `regressions confirm`, marked by their `interleaved` setting) are never points:
    they are comparisons, not the case's regular measurement (kernel sides of an `ab`
    share the case key, and confirm's re-runs would add a point on either side of the
    change they check). Bisection probes (label `bisect-<id>`) are left out of a series
    in time order, where their commits alternating between good and bad levels would be
    read as steps, and kept in a series in commit order: there each is a real
    measurement of the case at its commit, placed where that commit is in the history.
    """
    groups: dict[tuple[str, str, str, str], list[RunValues]] = defaultdict(list)
    for item in found:
        if item.run.status != RunStatus.COMPLETED or item.interleaved:
            continue
        groups[(item.metric.name, item.run.benchmark, item.run.case_key, item.machine_id)].append(item)
    series = []
    for (_, benchmark, case_key, machine_id), items in sorted(groups.items()):
        commits = [item.run.kernel_commit for item in items]
        if repo is not None and all(commits):
            points, order = _by_commit(items, commit_order(repo, {c for c in commits if c})), "commit"
        else:
            items = [i for i in items if not is_bisection_probe(i.run)]
            if not items:
                continue
            points, order = [Point((i.run,), tuple(i.values)) for i in items], "time"
        series.append(Series(items[0].metric, benchmark, case_key, machine_id,
                             items[0].run.hostname, points, order))
    return series


def case_parts(key: str) -> list[str]:
    """A case key split at its top-level commas (a JSON-quoted value may hold commas)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for char in key:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def matching_cases(keys: Iterable[str], wanted: str) -> list[str]:
    """The case keys holding every comma-separated part of `wanted`, e.g. `clients=4`
    matches `clients=4,duration=5`; a whole key matches itself."""
    parts = set(case_parts(wanted))
    return sorted({key for key in keys if key == wanted or parts <= set(case_parts(key))})


def _by_commit(items: list[RunValues], order: dict[str, int]) -> list[Point]:
    pooled: dict[str, list[RunValues]] = defaultdict(list)
    for item in items:
        assert item.run.kernel_commit is not None
        pooled[item.run.kernel_commit].append(item)
    return [
        Point(tuple(i.run for i in group), tuple(v for i in group for v in i.values))
        for _, group in sorted(pooled.items(), key=lambda kv: order[kv[0]])
    ]


def commit_order(repo: Path, commits: set[str]) -> dict[str, int]:
    """Position of each run's commit in the repository's history, oldest first."""
    try:
        return git.topo_positions(repo, commits)
    except git.GitError as exc:
        raise SeriesError(f"{exc} (is every run's --kernel-commit in this repository?)") from None


def judge(metric: Metric, change_pct: float) -> str:
    """regression / improvement by the metric's direction; `change` for neutral ones."""
    if metric.direction is Direction.NEUTRAL:
        return "change"
    better = (change_pct > 0) == (metric.direction is Direction.HIGHER)
    return "improvement" if better else "regression"


def read_csv_column(path: Path, column: str | None = None) -> tuple[str, list[float]]:
    """(column name, values) of one numeric column of a CSV file with a header: the named
    one, else the first whose first data value is a number. Errors name file and line."""
    header, rows = read_csv_table(path)
    if column is not None:
        if column not in header:
            raise SeriesError(f"{path}:1: no column {column!r}; the header has {', '.join(header)}")
        index = header.index(column)
    else:
        numeric = numeric_columns(header, rows)
        if not numeric:
            raise SeriesError(f"{path}:2: no numeric column; name one with --column")
        index = header.index(numeric[0])
    return header[index], csv_numbers(path, header, rows, index)


def read_csv_table(path: Path) -> tuple[list[str], list[list[str]]]:
    """The header and the data rows of a CSV file; SeriesError names the file and line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SeriesError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SeriesError(f"{path}:{line}: not UTF-8 text (a CSV file was expected)") from None
    rows = list(csv.reader(text.splitlines()))
    if len(rows) < 2:
        raise SeriesError(f"{path}:1: expected a header line and at least one data line")
    return [name.strip() for name in rows[0]], rows[1:]


def numeric_columns(header: list[str], rows: list[list[str]]) -> list[str]:
    """The columns whose first data value is a number."""
    return [header[i] for i, cell in enumerate(rows[0]) if i < len(header) and _number(cell) is not None]


def csv_numbers(path: Path, header: list[str], rows: list[list[str]], index: int) -> list[float]:
    """Column `index` of every data row as numbers; a cell that is not one is an error
    naming its line (the header is line 1)."""
    values = []
    for line, row in enumerate(rows, start=2):
        value = _number(row[index]) if index < len(row) else None
        if value is None:
            cell = row[index] if index < len(row) else ""
            raise SeriesError(
                f"{path}:{line}: {header[index]!r} is {cell!r}, not a number; fix or delete the line"
            )
        values.append(value)
    return values


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
