"""`compare --csv`: perfline's comparison of samples kept in CSV files (ministat's job).

Each file is one side, the first the baseline. A column named `run` groups rows into
runs (runs are then the unit, as for stored runs); without it every row is its own run.
Every other numeric column is a metric, or `--column` picks one. The columns are one
family, judged together by Benjamini–Hochberg at half of alpha, unless `--primary`
names the headline column(s): those are tested at alpha each and the others together as
the family, as a benchmark's headline metrics and the rest of its table. The result is a
CaseComparison like a comparison of stored runs, so the table and the JSON are the same.
"""

from __future__ import annotations

from pathlib import Path

from perfline.analysis.comparison import (
    CaseComparison,
    MetricRow,
    Side,
    family_controlled_together,
    family_note,
    one_run_note,
)
from perfline.analysis.series import SeriesError, csv_numbers, numeric_columns, read_csv_table
from perfline.records.metric import Direction, Metric
from perfline.stats.summary import summarize

RUN_COLUMN = "run"


def read_side(path: Path, columns: list[str] | None) -> tuple[dict[str, list[float]], list[int]]:
    """{metric: values} and each row's run number."""
    header, rows = read_csv_table(path)
    names = columns or [c for c in numeric_columns(header, rows) if c != RUN_COLUMN]
    if not names:
        raise SeriesError(f"{path}:2: no numeric column besides {RUN_COLUMN!r}; name one with --column")
    metrics = {}
    for name in names:
        if name not in header:
            raise SeriesError(f"{path}:1: no column {name!r}; the header has {', '.join(header)}")
        metrics[name] = csv_numbers(path, header, rows, header.index(name))
    if RUN_COLUMN in header:
        index = header.index(RUN_COLUMN)
        labels = [row[index] if index < len(row) else "" for row in rows]
        numbering = {label: i for i, label in enumerate(dict.fromkeys(labels))}
        runs = [numbering[label] for label in labels]
    else:
        runs = list(range(len(rows)))
    return metrics, runs


def compare_csv(
    paths: list[Path], columns: list[str] | None, direction: Direction, *, alpha: float, floor_pct: float,
    primary: list[str] | None = None,
) -> CaseComparison:
    """Every metric of the first file against the same column of each other file;
    `primary` names the headline columns."""
    from perfline.stats.two_sample import compare  # scipy: only when comparing

    if len(paths) < 2:
        raise SeriesError("compare --csv needs two files or more: the baseline and one other")
    sides = [read_side(path, columns) for path in paths]
    base_metrics, base_runs = sides[0]
    rows = []
    for name, base_values in base_metrics.items():
        for path, (metrics, _) in zip(paths[1:], sides[1:], strict=True):
            if name not in metrics:
                raise SeriesError(f"{path}:1: no column {name!r}, which {paths[0]} has; name the columns "
                                  "to compare with --column")
        metric = Metric(name, "", direction)
        comparisons = [
            compare(base_values, metrics[name], metric, alpha=alpha, floor_pct=floor_pct,
                    base_runs=base_runs, other_runs=runs)
            for metrics, runs in sides[1:]
        ]
        rows.append(MetricRow(metric, "benchmark", summarize(base_values), list(comparisons)))
    headline = _headline(paths[0], list(base_metrics), primary or [])
    rows = family_controlled_together(rows, alpha, headline)
    single = [str(path) for path, (_, runs) in zip(paths, sides, strict=True) if len(set(runs)) == 1]
    notes = [one_run_note(single)] if single else []
    if note := family_note(rows, headline, alpha):
        notes.append(note)
    return CaseComparison(
        benchmark="csv",
        case_key=", ".join(str(p) for p in paths),
        sides=[Side(str(path), []) for path in paths],
        rows=rows,
        differences=[[] for _ in paths[1:]],
        profile_shifts=[[] for _ in paths[1:]],
        chain_shifts=[[] for _ in paths[1:]],
        notes=notes,
        alpha=alpha,
    )


def _headline(path: Path, names: list[str], primary: list[str]) -> set[int]:
    """The rows of the --primary columns, which must be among those compared."""
    for name in primary:
        if name not in names:
            raise SeriesError(f"{path}:1: --primary {name}: not among the compared columns "
                              f"({', '.join(names)}); name one of them")
    return {i for i, name in enumerate(names) if name in primary}
