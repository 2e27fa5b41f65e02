"""The `perfline` command: thin wrappers that call the packages and print their results."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from perfline import __version__
from perfline.benchmarks import BENCHMARKS
from perfline.cli.progress import ProgressObserver
from perfline.jobs import JobError, expand, job_from_benchmark, load_job, parse_param_args
from perfline.jobs.spec import JobSpec
from perfline.monitors import MONITORS
from perfline.registry import UnknownName
from perfline.report.runs import (
    results_table,
    run_detail_json,
    run_info_json,
    run_view,
    runs_table,
)
from perfline.runner import RunContext, RunOutcome, execute, terminate_as_interrupt
from perfline.store import COMPLETED, RunNotFound, Store, resolve_url
from perfline.targets import local

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="perfline: run kernel benchmarks, store every sample, find what changed.",
)
# Tables are wide; when stdout is a pipe or file, 80 columns would fold every row.
console = Console(width=None if sys.stdout.isatty() else 130)
errors = Console(stderr=True)

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130


class State:
    db: str | None = None


state = State()


@app.callback()
def main_options(
    db: Annotated[
        Optional[str],
        typer.Option(help="Store: an SQLAlchemy URL or an SQLite file (default $PERFLINE_DB)."),
    ] = None,
) -> None:
    state.db = db


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    errors.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def open_store() -> Store:
    store = Store.open(state.db)
    reaped = store.reap_dead_runs(local.boot_id(), local.hostname(), local.pid_alive)
    if reaped:
        errors.print(f"[yellow]marked {reaped} run(s) interrupted: their process had died[/yellow]")
    return store


@app.command("list")
def list_catalogue() -> None:
    """Benchmarks and monitors, one line each, with what they measure."""
    for title, registry in (("benchmarks", BENCHMARKS), ("monitors", MONITORS)):
        table = Table(title=title, title_justify="left", show_lines=False)
        table.add_column("name", style="cyan", no_wrap=True)
        table.add_column("what it measures")
        table.add_column("metrics (unit, better)", style="dim")
        for entry in registry.all():
            metrics = ", ".join(f"{m.name} ({m.unit or '-'}, {m.direction})" for m in entry.metrics)
            table.add_row(entry.name, entry.summary, metrics)
        console.print(table)


@app.command()
def run(
    what: Annotated[str, typer.Argument(help="A job file (YAML) or a benchmark name.")],
    repeat: Annotated[Optional[int], typer.Option(min=1, help="Measured repetitions.")] = None,
    warmup: Annotated[Optional[int], typer.Option(min=0, help="Unstored warm-up runs.")] = None,
    param: Annotated[
        Optional[list[str]], typer.Option("--param", "-p", help="KEY=VALUE, for a benchmark name.")
    ] = None,
    monitor: Annotated[
        Optional[list[str]], typer.Option("--monitor", "-m", help="Monitor to run beside it.")
    ] = None,
    no_monitors: Annotated[bool, typer.Option(help="Run no monitors.")] = False,
    label: Annotated[Optional[str], typer.Option(help="Label stored with the run, e.g. v6.7.")] = None,
    kernel_commit: Annotated[
        Optional[str], typer.Option(help="Commit of the kernel under test.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
) -> None:
    """Run a job file or a single benchmark; every sample is stored as it is taken."""
    job = _load(what, param or [], monitor, no_monitors)
    job = replace(
        job,
        repeat=repeat if repeat is not None else job.repeat,
        warmup=warmup if warmup is not None else job.warmup,
    )
    try:
        cases = expand(job)
    except JobError as exc:
        raise fail(str(exc)) from None
    store = open_store()
    outcomes: list[RunOutcome] = []
    with ProgressObserver(errors, cases) as observer, terminate_as_interrupt():
        ctx = RunContext(
            store=store,
            fingerprint=local.fingerprint,
            observer=observer,
            label=label,
            kernel_commit=kernel_commit,
        )
        try:
            for case in cases:
                outcomes.append(execute(case, ctx))
        except KeyboardInterrupt:
            observer.stop()
            errors.print("[yellow]interrupted: finished repetitions are stored[/yellow]")
            raise typer.Exit(EXIT_INTERRUPTED) from None
    details = [store.get_run(o.run_id) for o in outcomes]
    if as_json:
        print(json.dumps([run_detail_json(d) for d in details], indent=2))
    else:
        console.print(results_table(details))
        console.print(f"[dim]samples, monitors and fingerprint: perfline show {details[-1].info.id}[/dim]")
    if any(o.status != COMPLETED for o in outcomes):
        raise typer.Exit(EXIT_FAILED)


def _load(what: str, params: list[str], monitors: list[str] | None, no_monitors: bool) -> JobSpec:
    path = Path(what)
    chosen = () if no_monitors else (tuple(monitors) if monitors else None)
    try:
        if path.suffix in (".yaml", ".yml") or path.is_file():
            if params:
                raise fail("--param is for a benchmark name; set params in the job file")
            job = load_job(path)
            return job if chosen is None else replace(job, monitors=chosen)
        return job_from_benchmark(what, parse_param_args(params), monitors=chosen)
    except (JobError, UnknownName) as exc:
        raise fail(str(exc).strip("'\"")) from None


@app.command()
def runs(
    limit: Annotated[int, typer.Option(min=1, help="How many runs to list.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Recent runs, newest first."""
    listed = open_store().list_runs(limit)
    if as_json:
        print(json.dumps([run_info_json(r) for r in listed], indent=2))
    elif not listed:
        console.print(f"no runs yet in {resolve_url(state.db)}; try `perfline run sched-pipe`")
    else:
        console.print(runs_table(listed))


@app.command()
def show(
    run_id: Annotated[int, typer.Argument(help="Run id, from `perfline runs`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """One run: samples, summary, monitors and fingerprint."""
    try:
        detail = open_store().get_run(run_id)
    except RunNotFound as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(json.dumps(run_detail_json(detail), indent=2))
    else:
        console.print(run_view(detail))


@app.command()
def version() -> None:
    """Print the version."""
    print(__version__)

