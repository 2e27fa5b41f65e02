"""`history`, `detect` and `regressions`: series of stored runs, their change points,
and the regression records made from them."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from perfline.analysis import regressions as records
from perfline.analysis.series import (
    Series,
    SeriesError,
    build_series,
    matching_cases,
    read_csv_column,
)
from perfline.cli.common import EXIT_FAILED, console, errors, fail, open_store, running
from perfline.cli.help_style import App
from perfline.report.comparison_table import comparison_view
from perfline.report.regressions import (
    csv_changes_json,
    csv_changes_view,
    detected_json,
    detected_table,
    regression_json,
    regressions_table,
)
from perfline.report.series_view import history_table, write_png
from perfline.targets import local

if TYPE_CHECKING:
    from perfline.store import Store

RepoOption = Annotated[
    Path | None,
    typer.Option(help="Git repository of the runs' --kernel-commit: order points by its history."),
]
RateOption = Annotated[
    float,
    typer.Option(min=1e-9, max=0.5, help="False-alarm rate per test (default: 1 in 1000)."),
]


def _series(store: Store, metric: str | None, case: str | None, machine: str | None,
            since: datetime | None, repo: Path | None) -> list[Series]:
    found = store.metric_values(metric=metric, machine_id=machine, since=since)
    if case is not None and found:
        keys = {item.run.case_key for item in found}
        chosen = set(matching_cases(keys, case))
        if not chosen:
            raise fail(f"no case of {metric or 'any metric'} matches {case!r}; stored cases: "
                       + "; ".join(sorted(keys)))
        found = [item for item in found if item.run.case_key in chosen]
    try:
        return build_series(found, repo)
    except SeriesError as exc:
        raise fail(str(exc)) from None


def history(
    metric: Annotated[str, typer.Argument(help="Metric, e.g. tbench.throughput.")],
    case: Annotated[
        str | None,
        typer.Option(help="Case: a key or parts of one, e.g. clients=4 (every matching case is shown)."),
    ] = None,
    machine: Annotated[str | None, typer.Option(help="Machine id (default: all).")] = None,
    repo: RepoOption = None,
    png: Annotated[Path | None, typer.Option(help="Write the graph to this PNG file.")] = None,
    false_alarm_rate: RateOption = 0.001,
) -> None:
    """A metric's series: every point with its spread, change points marked.

    Example: perfline history tbench.throughput --case clients=4 --png tbench.png
    """
    all_series = _series(open_store(), metric, case, machine, None, repo)
    if not all_series:
        raise fail(f"no stored samples of {metric}" + (f" for case {case}" if case else ""))
    if png is not None and len(all_series) > 1:
        cases = "; ".join(f"--case '{s.case_key}'" for s in all_series)
        raise fail(f"{len(all_series)} series match; pick one for the PNG: {cases}")
    for series in all_series:
        changes = series.change_points(false_alarm_rate)
        console.print(history_table(series, changes))
        if png is not None:
            write_png(series, changes, png)
            console.print(f"graph written to {png}")


def detect(
    metric: Annotated[str | None, typer.Option(help="Only this metric.")] = None,
    since: Annotated[
        datetime | None, typer.Option(help="Only runs started since, e.g. 2026-11-01.")
    ] = None,
    repo: RepoOption = None,
    csv: Annotated[Path | None, typer.Option(help="Detect in a CSV column instead of the store.")] = None,
    column: Annotated[str | None, typer.Option(help="With --csv: the column (default: first numeric).")] = None,
    false_alarm_rate: RateOption = 0.001,
    floor: Annotated[float, typer.Option(
        min=0, help="Record only changes larger than this many % (compare's and confirm's floor).")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Change points in every stored series (recorded as regressions), or in a CSV column.

    Example: perfline detect --metric tbench.throughput --since 2026-11-01
    """
    if csv is not None:
        _detect_csv(csv, column, false_alarm_rate, as_json)
        return
    store = open_store()
    found = []
    below_floor = 0
    for series in _series(store, metric, None, None, since, repo):
        claimed: set[int] = set()  # a record is one change point's, however close another is
        for change in series.change_points(false_alarm_rate):
            # Real but too small to matter, and `regressions confirm` judges with the
            # same floor: a record it could never confirm would only be noise to triage.
            if abs(change.change_pct) <= floor:
                below_floor += 1
                continue
            regression, created = records.record(store, series, change, claimed)
            claimed.add(regression.id)
            found.append((series, change, regression, created))
    if below_floor:
        errors.print(f"{below_floor} change point(s) within ±{floor:g}% not recorded (`perfline history` "
                     "shows them; --floor sets the limit)")
    if as_json:
        print(json.dumps(detected_json(found), indent=2))
        return
    if not found:
        console.print("no change points")
        return
    console.print(detected_table(found))


def _detect_csv(path: Path, column: str | None, rate: float, as_json: bool) -> None:
    try:
        name, values = read_csv_column(path, column)
    except SeriesError as exc:
        raise fail(str(exc)) from None
    from perfline.stats.changepoint import detect as detect_points  # scipy, only here

    changes = detect_points(values, false_alarm_rate=rate)
    if as_json:
        print(json.dumps(csv_changes_json(changes, len(values)), indent=2))
        return
    console.print(csv_changes_view(path, name, changes, len(values)))


regressions_app = App(
    help="Regressions and improvements found by `perfline detect`, and their status.\n\n"
         "Example: perfline regressions --status new",
    invoke_without_command=True,
    no_args_is_help=False,
)


@regressions_app.callback()
def list_regressions(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(help=f"Only this status: {', '.join(records.STATUSES)}.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    report: Annotated[int | None, typer.Option("--report", help="Print this record's report instead (the text "
                                                                "of `perfline report regression ID`).")] = None,
) -> None:
    """List regression records, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    if report is not None:
        from perfline.report import regression_report

        print(regression_report.text(regression_report.build(open_store(), report)), end="")
        return
    if status is not None and status not in records.STATUSES:
        raise fail(f"unknown status {status!r}: use one of {', '.join(records.STATUSES)}")
    listed = open_store().regressions(status)
    if as_json:
        print(json.dumps([regression_json(r) for r in listed], indent=2))
        return
    if not listed:
        console.print("no regressions recorded" + (f" with status {status}" if status else "")
                      + "; `perfline detect` finds them")
        return
    console.print(regressions_table(listed))


@regressions_app.command("confirm")
def confirm_regression(
    regression_id: Annotated[int, typer.Argument(help="Regression id.")],
    pairs: Annotated[int, typer.Option(min=5, help="Interleaved pairs to re-run.")] = 10,
) -> None:
    """Re-run both sides interleaved on this host: confirmed or false alarm.

    Example: perfline regressions confirm 3 --pairs 12
    """
    from perfline.store import RunNotFound  # SQLAlchemy: when the store is opened (cli.common.open_store)

    store = open_store()
    try:
        regression = store.get_regression(regression_id)
        found = records.reproduction(store, regression, pairs, local.fingerprint())
        with running(store, [found.before, found.after], f"confirm-{regression_id}", None) as ctx:
            updated, comparison = records.confirm(store, regression, found, ctx, pairs)
    except (RunNotFound, records.CannotConfirm, records.TransitionError) as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    console.print(comparison_view(comparison))
    console.print(f"regression {updated.id}: [bold]{updated.status}[/bold] — {updated.note}")


@regressions_app.command("mark")
def mark_regression(
    regression_id: Annotated[int, typer.Argument(help="Regression id.")],
    status: Annotated[str, typer.Argument(help=f"New status: {', '.join(records.STATUSES)}.")],
    note: Annotated[str | None, typer.Option(help="Why, e.g. the fixing commit.")] = None,
) -> None:
    """Set a regression's status by hand (e.g. bisected, fixed).

    Example: perfline regressions mark 3 fixed --note 'fixed by 1a2b3c4d'
    """
    from perfline.store import RunNotFound  # SQLAlchemy: when the store is opened

    try:
        updated = records.transition(open_store(), regression_id, status, note)
    except (RunNotFound, records.TransitionError) as exc:
        raise fail(str(exc)) from None
    console.print(f"regression {updated.id}: {updated.status}")
