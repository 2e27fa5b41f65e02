"""`perfline bisect`: find the commit that changed a metric, with few benchmark runs."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from perfline.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, console, errors, fail, notify, open_store
from perfline.cli.help_style import App
from perfline.records.errors import UserError
from perfline.system.speed import PATIENCE_S

if TYPE_CHECKING:
    from perfline.bisect.driver import Progress as ProbeProgress
    from perfline.store import Store
    from perfline.store.bisections import BisectionRecord, BisectionSpec

# The bisection core needs scipy; it is imported inside the commands that use it, so
# that every other perfline command starts without loading it.

bisect_app = App(help="Noise-aware bisection of a performance change to its commit.\n\n"
                      "Example: perfline bisect status 4")


PaceOption = Annotated[str, typer.Option(
    help="Take a sample again when the machine ran this much slower than its pace of the last two minutes "
         "around it (the pace helper; more when the pace itself wanders), or off.")]
PatienceOption = Annotated[float, typer.Option(
    min=0.0, help="Minutes of samples taken again in a row, the machine staying slow, before the bisection "
                  "stops (resumable).")]


@bisect_app.command("start")
def start(
    good: Annotated[str, typer.Option(help="A commit with the old performance.")],
    bad: Annotated[str, typer.Option(help="A later commit with the new performance.")],
    repo: Annotated[Path | None, typer.Option(
        help="The git repository. Its checkout is not touched: each probed commit gets a worktree under "
             "perfline's cache, removed (and pruned from .git/worktrees) when the bisection ends.")] = None,
    build: Annotated[str | None, typer.Option(help="Shell command that builds a commit, e.g. 'make -j2'.")] = None,
    kernel_tree: Annotated[Path | None, typer.Option(
        help="A Linux git tree instead of --repo/--build: each probe's bzImage is built with --config "
             "and boots the --job in a VM.")] = None,
    config: Annotated[Path | None, typer.Option(help="With --kernel-tree: the .config to build with "
                                                   "(make olddefconfig fills in new options).")] = None,
    command: Annotated[str | None, typer.Option(
        help="Benchmark command, run by sh in the commit's built worktree (also $PERFLINE_TREE), so a "
             "script of yours needs an absolute path, e.g. $PWD/bench.sh; the last line of its stdout "
             "is the value.")] = None,
    direction: Annotated[str | None, typer.Option(help="lower or higher: which way is better.")] = None,
    job: Annotated[Path | None, typer.Option(help="A perfline job (one case) instead of --command.")] = None,
    metric: Annotated[str | None, typer.Option(help="With --job: the metric to bisect.")] = None,
    max_runs: Annotated[int, typer.Option(min=10, help="Benchmark runs at most.")] = 200,
    history: Annotated[bool, typer.Option(
        help="With --job: use the stored runs of the job's case at the good and bad commits "
             "(this machine, --kernel-commit) as samples of the two levels.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    pace_tolerance: PaceOption = "10%",
    pace_patience: PatienceOption = PATIENCE_S / 60,
) -> None:
    """Start a bisection between a good and a bad commit, and run it to the end.

    Example: perfline bisect start --repo ~/src/app --good v1.0 --bad v1.1 --build 'make -j2' --command ./bench --direction lower
    """
    from perfline.bisect.session import StartRequest
    from perfline.bisect.session import start as start_bisection

    request = StartRequest(good=good, bad=bad, repo=repo, build=build, kernel_tree=kernel_tree, config=config,
                           command=command, direction=direction, job=job, metric=metric, max_runs=max_runs,
                           history=history)
    store = open_store()
    tolerance = _pace_tolerance(pace_tolerance)
    _run(store, start_bisection(store, request, notify), as_json, tolerance, 60 * pace_patience)


@bisect_app.command("resume")
def resume(
    bisection_id: Annotated[int | None, typer.Argument(help="Bisection id (default: the newest unfinished).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    pace_tolerance: PaceOption = "10%",
    pace_patience: PatienceOption = PATIENCE_S / 60,
) -> None:
    """Continue a bisection after Ctrl-C or a crash; no finished measurement is repeated.

    Example: perfline bisect resume 4
    """
    tolerance = _pace_tolerance(pace_tolerance)
    store = open_store()
    _run(store, store.bisection(bisection_id, unfinished=bisection_id is None), as_json, tolerance,
         60 * pace_patience)


@bisect_app.command("status")
def status(bisection_id: Annotated[int | None, typer.Argument(help="Bisection id (default: newest).")] = None) -> None:
    """Runs so far, the most probable commits, and the next probe.

    Example: perfline bisect status 4
    """
    from perfline.bisect.driver import replay
    from perfline.bisect.session import commits_of
    from perfline.report.bisection import status_view

    store = open_store()
    record = store.bisection(bisection_id)
    console.print(status_view(store, record, replay(store, record), commits_of(record)))
    if record.result:
        console.print_json(data=record.result)


@bisect_app.command("log")
def log(bisection_id: Annotated[int | None, typer.Argument(help="Bisection id (default: newest).")] = None) -> None:
    """Every probe: commit, sample, phase; and every build.

    Example: perfline bisect log 4
    """
    from perfline.bisect.session import commits_of
    from perfline.report.bisection import builds_table, kind_line, probes_table

    store = open_store()
    record = store.bisection(bisection_id)
    commits = commits_of(record)
    console.print(kind_line(record.spec))
    console.print(probes_table(store, record, commits))
    console.print(builds_table(store, record, commits))


def _pace_tolerance(text: str) -> float | None:
    if text == "off":
        return None
    try:
        value = float(text.removesuffix("%")) / 100
    except ValueError:
        value = -1.0
    if value <= 0:
        raise UserError(f"--pace-tolerance {text}: give a percentage such as 10% or 25%, or off")
    return value


def carry_on(store: Store, record: BisectionRecord) -> None:
    """A kexec bisection after one of its boots, back on the default kernel (`perfline
    resume`): on to its next probe's boot, or to its end."""
    _run(store, record, as_json=False, pace_tolerance=None)


def _run(store: Store, record: BisectionRecord, as_json: bool, pace_tolerance: float | None,
         patience_s: float = PATIENCE_S) -> None:
    from perfline.bisect.merges import merged_branch
    from perfline.bisect.session import BisectionFailed, commits_of, run
    from perfline.records.status import BisectionStatus
    from perfline.report.bisection import outcome_lines, probes_table
    from perfline.runner import terminate_as_interrupt  # not above: the runner is slow to import
    from perfline.runner.kexec_resume import MachineBooting

    with _progress(record.spec.max_runs) as update, terminate_as_interrupt():
        try:
            outcome = run(store, record, update, notify, pace_tolerance, patience_s=patience_s)
        except MachineBooting as booting:
            # Not a crash: the probe's kernel boots, and `perfline resume` carries the bisection on.
            errors.print(f"bisection {record.id}: probing {escape(booting.boot.kernel_commit or '?')[:12]} in kexec "
                         f"boot {booting.boot.id} ({escape(booting.boot.release)}); `perfline resume` measures it "
                         "after the boot and carries the bisection on", highlight=False, soft_wrap=True)
            return
        except BisectionFailed as exc:
            state = "failed" if exc.record.status == BisectionStatus.FAILED else "stopped"
            raise fail(f"bisection {record.id} {state}: {exc}", EXIT_FAILED) from None
        except KeyboardInterrupt:
            errors.print(f"[yellow]interrupted: `perfline bisect resume {record.id}` continues[/yellow]")
            raise typer.Exit(EXIT_INTERRUPTED) from None
    found = outcome.to_json()
    branch = (merged_branch(Path(record.spec.repo), found["culprit"])
              if outcome.result.status == BisectionStatus.FOUND and found["culprit"] else None)
    if as_json:
        if branch is not None:
            found["merged_branch"] = {"merge": branch.merge, "fork": branch.fork, "tip": branch.tip}
        print(json.dumps(found, indent=2))
    else:
        commits = commits_of(record)
        console.print(probes_table(store, outcome.record, commits))
        for line in outcome_lines(outcome, commits):
            console.print(line)
        if branch is not None:
            # A first-parent bisection stops at the merge; the tracker goes on into its
            # branch by itself (track.narrowing), here the user is told how.
            console.print(f"the culprit is a merge: the change came in with the branch it merged, "
                          f"{branch.fork[:12]}..{branch.tip[:12]}; bisect that with\n  "
                          f"{escape(_start_command(record.spec, branch.fork, branch.tip))}",
                          highlight=False, soft_wrap=True)
    if outcome.result.status not in (BisectionStatus.FOUND, BisectionStatus.RANGE):
        raise typer.Exit(EXIT_FAILED)


def _start_command(spec: BisectionSpec, good: str, bad: str) -> str:
    """The `perfline bisect start` of the bisection's build and benchmark over good..bad."""
    where = (["--kernel-tree", spec.repo, "--config", spec.kernel_config_source or str(spec.kernel_config)]
             if spec.kernel_config else ["--repo", spec.repo, "--build", spec.build])
    what = (["--job", spec.job, "--metric", spec.metric] if spec.job
            else ["--command", str(spec.command), "--direction", spec.direction])
    return shlex.join(["perfline", "bisect", "start", "--good", good, "--bad", bad, *where, *what])


@contextmanager
def _progress(max_runs: int) -> Iterator[ProbeProgress]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("[bold]bisect"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("P(top)={task.fields[top]:.3f}  {task.description}"),
                        TimeElapsedColumn(), console=errors)
    task = progress.add_task("", total=max_runs, top=0.0)

    def update(event: str, runs: int, top: float) -> None:
        progress.update(task, completed=runs, description=event, top=top)

    with progress:
        yield update
