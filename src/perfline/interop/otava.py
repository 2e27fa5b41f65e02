"""Otava's CSV: a `time` column, an optional `commit` column, metrics and attributes.

Otava (Apache, formerly Hunter) reads a CSV whose configuration names the metric
columns and the attribute columns (a branch, a configuration, an experiment). Without
that file, perfline guesses: a column whose every value is a number is a metric, any
other an attribute; `--metrics` and `--attributes` fix either list, as Otava's file
does, and a column in neither is left out. Each attribute is a parameter of the row's
run, so each distinct value is a series of its own (`perfline history otava.metric1
--case branch=main`), as Otava splits them; the `commit` column is the run's commit.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from perfline.interop.jsonfile import read_text
from perfline.interop.model import ImportedMetric, ImportedRun, ImportFailed
from perfline.records.metric import Direction

TIME, COMMIT = "time", "commit"


@dataclass(frozen=True)
class OtavaColumns:
    """`--metrics` and `--attributes`: each, when given, is that list exactly."""

    metrics: tuple[str, ...] | None = None
    attributes: tuple[str, ...] | None = None


def otava(path: Path, columns: OtavaColumns | None = None) -> tuple[list[ImportedRun], int]:
    """One run per row: its time and commit from the row, its attributes as parameters,
    a sample of each metric; an empty or non-finite metric cell is skipped and counted."""
    header, rows = _table(path)
    t, c = header.index(TIME), header.index(COMMIT) if COMMIT in header else None
    metrics, attributes = _roles(path, header, rows, columns or OtavaColumns())
    runs, skipped = [], 0
    for line, row in rows:
        params: dict[str, str | int | float | bool] = {"file": path.stem}
        params.update((header[i], row[i].strip()) for i in attributes)
        run = ImportedRun("otava", params, started_at=_time(path, row[t], line),
                          commit=row[c].strip() if c is not None else None)
        for i in metrics:
            cell = row[i].strip()
            if not cell:
                skipped += 1
                continue
            try:
                value = float(cell)
            except ValueError:
                raise ImportFailed(path, f"{header[i]!r} is {cell!r}, not a number (--attributes {header[i]} reads "
                                         "the column as an attribute)", line) from None
            if not math.isfinite(value):
                skipped += 1
                continue
            run.metrics.append(ImportedMetric(f"otava.{header[i]}", "", Direction.LOWER, [value]))
        runs.append(run)
    return runs, skipped


def _table(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the data rows with their line numbers (blank lines left out)."""
    try:
        lines = list(csv.reader(io.StringIO(read_text(path))))
    except csv.Error as exc:
        raise ImportFailed(path, f"not a CSV file: {exc}") from None
    if len(lines) < 2:
        raise ImportFailed(path, "expected a header line and at least one data line", 1)
    header = [h.strip() for h in lines[0]]
    if TIME not in header:
        raise ImportFailed(path, f"no `{TIME}` column (the header has {', '.join(header)})", 1)
    for name in header:
        if not name:
            raise ImportFailed(path, "a column without a name in the header", 1)
        if header.count(name) > 1:
            raise ImportFailed(path, f"the column {name!r} appears {header.count(name)} times in the header", 1)
    rows = []
    for line, row in enumerate(lines[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise ImportFailed(path, f"{len(row)} fields, the header has {len(header)}", line)
        rows.append((line, row))
    return header, rows


def _roles(path: Path, header: list[str], rows: list[tuple[int, list[str]]],
           columns: OtavaColumns) -> tuple[list[int], list[int]]:
    """The metric and the attribute columns, by index: as given, else guessed."""
    for option, names in (("--metrics", columns.metrics), ("--attributes", columns.attributes)):
        for name in names or ():
            if name not in header:
                raise ImportFailed(path, f"{option} names {name!r}, not a column (the header has "
                                         f"{', '.join(header)})", 1)
            if name == TIME or (name == COMMIT and option == "--metrics"):
                raise ImportFailed(path, f"{option} names {name!r}: the {name} column is each run's {name}", 1)
    both = set(columns.metrics or ()) & set(columns.attributes or ())
    if both:
        raise ImportFailed(path, f"{', '.join(sorted(both))}: given to both --metrics and --attributes", 1)
    # Otava's files list `commit` among the attributes; here it is the run's commit.
    free = [i for i, name in enumerate(header) if name not in (TIME, COMMIT)]
    guessed = [i for i in free if name_is_given(header[i], columns) is None]
    numeric = {i for i in guessed if all(_number(row[i]) for _, row in rows)}
    metrics = ([header.index(n) for n in columns.metrics] if columns.metrics is not None
               else [i for i in guessed if i in numeric])
    attributes = ([header.index(n) for n in columns.attributes if n != COMMIT] if columns.attributes is not None
                  else [i for i in guessed if i not in numeric])
    return sorted(metrics), sorted(attributes)


def name_is_given(name: str, columns: OtavaColumns) -> str | None:
    """Which option names the column, if one does."""
    if name in (columns.metrics or ()):
        return "--metrics"
    if name in (columns.attributes or ()):
        return "--attributes"
    return None


def _number(cell: str) -> bool:
    """A metric's cell: a number, or empty (a missing value)."""
    cell = cell.strip()
    if not cell:
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _time(path: Path, text: str, line: int) -> datetime:
    text = text.strip()
    if text.isdigit():
        try:
            return datetime.fromtimestamp(int(text), UTC)
        except (OverflowError, OSError, ValueError):
            raise ImportFailed(path, f"time {text}: not a date in epoch seconds", line) from None
    for pattern in ("%Y.%m.%d %H:%M:%S %z", "%Y-%m-%d %H:%M:%S %z", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(text, pattern)
        except ValueError:
            continue
    raise ImportFailed(path, f"time {text!r}: not a date (e.g. 2024.01.01 3:00:00 +0100) nor epoch seconds", line)
