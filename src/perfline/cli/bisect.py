"""`perfline bisect`: find the commit that changed a metric, with few benchmark runs."""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from perfline.benchmarks import BENCHMARKS
from perfline.bisect import kernel
from perfline.bisect.worktree import Builder, Commit, RangeError, commit_range
from perfline.cli.common import EXIT_FAILED, console, errors, fail, open_store, running
from perfline.jobs import JobError, expand, load_job
from perfline.records.job import Case
from perfline.records.metric import Direction, Measurement
from perfline.records.status import RunStatus
from perfline.runner import Observer, RunOutcome, execute
from perfline.store import Store
from perfline.store.bisections import (
    BisectionNotFound,
    BisectionRecord,
    BisectionSpec,
    BisectSample,
)
from perfline.system.process import ToolMissing, tail
from perfline.targets import local
from perfline.targets.kernels import KernelError

if TYPE_CHECKING:
    from perfline.bisect.driver import Measure, Outcome

# The bisection core needs scipy; it is imported inside the commands that use it, so
# that every other perfline command starts without loading it.

bisect_app = typer.Typer(help="Noise-aware bisection of a performance change to its commit.",
                         no_args_is_help=True)
COMMAND_TIMEOUT_S = 3600.0


@bisect_app.command("start")
def start(
    good: Annotated[str, typer.Option(help="A commit with the old performance.")],
    bad: Annotated[str, typer.Option(help="A later commit with the new performance.")],
    repo: Annotated[Path | None, typer.Option(help="The git repository (it is never modified).")] = None,
    build: Annotated[str | None, typer.Option(help="Shell command that builds a commit, e.g. 'make -j2'.")] = None,
    kernel_tree: Annotated[Path | None, typer.Option(
        help="A Linux git tree instead of --repo/--build: each probe's bzImage is built with --config "
             "and boots the --job in a VM.")] = None,
    config: Annotated[Path | None, typer.Option(help="With --kernel-tree: the .config to build with "
                                                   "(make olddefconfig fills in new options).")] = None,
    command: Annotated[str | None, typer.Option(help="Benchmark command run in the built tree; "
                                                   "the last line of its stdout is the value.")] = None,
    direction: Annotated[str | None, typer.Option(help="lower or higher: which way is better.")] = None,
    job: Annotated[Path | None, typer.Option(help="A perfline job (one case) instead of --command.")] = None,
    metric: Annotated[str | None, typer.Option(help="With --job: the metric to bisect.")] = None,
    max_runs: Annotated[int, typer.Option(min=10, help="Benchmark runs at most.")] = 200,
    history: Annotated[bool, typer.Option(
        help="With --job: use the stored runs of the job's case at the good and bad commits "
             "(this machine, --kernel-commit) as samples of the two levels.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Start a bisection between a good and a bad commit, and run it to the end."""
    if kernel_tree is not None:
        if repo is not None or build is not None:
            raise fail("--kernel-tree builds with make olddefconfig and make bzImage: it excludes --repo and --build")
        if command is not None or job is None:
            raise fail("--kernel-tree boots each build with a job: give --job JOB --metric M, not --command")
        if config is None:
            raise fail("--kernel-tree needs --config FILE, the .config every commit is built with")
    else:
        if config is not None:
            raise fail("--config applies only to --kernel-tree")
        if repo is None or build is None:
            raise fail("give --repo DIR and --build CMD, or --kernel-tree DIR and --config FILE")
    if (command is None) == (job is None):
        raise fail("give either --command (with --direction) or --job (with --metric)")
    if job is not None and metric is None:
        raise fail("--job needs --metric, e.g. --metric sched-pipe.usecs_per_op")
    if job is not None:
        _job_case(job, booted=kernel_tree is not None)
    chosen = _direction(direction, job, metric)
    tree = kernel_tree if kernel_tree is not None else repo
    assert tree is not None
    kept_config: Path | None = None
    try:
        commits = commit_range(tree, good, bad)
        if kernel_tree is not None:
            kernel.check_tree(kernel_tree, commits[0].sha)
            assert config is not None
            kept_config = kernel.keep_config(config)
            build = kernel.build_command(kept_config)
    except (RangeError, kernel.KernelBisectError) as exc:
        raise fail(str(exc)) from None
    assert build is not None
    store = open_store()
    bisection_id = store.create_bisection(BisectionSpec(
        repo=str(tree.resolve()), good=good, bad=bad, commits=[c.sha for c in commits], build=build,
        command=command, job=str(job.resolve()) if job else None, metric=metric or "command.value",
        direction=chosen.value, max_runs=max_runs,
        kernel_config=str(kept_config) if kept_config else None,
        kernel_config_source=str(config.resolve()) if kept_config and config else None,
    ))
    errors.print(f"bisection {bisection_id}: {len(commits)} commits from {good} to {bad}; "
                 f"`perfline bisect resume {bisection_id}` continues it if interrupted")
    if history and job is not None and kernel_tree is None:
        assert metric is not None
        _record_history(store, bisection_id, _job_case(job, booted=False), metric, tree, commits)
    _run(store, bisection_id, commits, as_json)


def _record_history(store: Store, bisection_id: int, case: Case, metric: str, repo: Path,
                    commits: list[Commit]) -> None:
    """The endpoints' stored samples, recorded once as the bisection's first samples, so
    that a resume replays the same evidence whatever runs are stored later."""
    from perfline.bisect.driver import HISTORY
    from perfline.bisect.endpoints import endpoint_history

    found = endpoint_history(store, case, metric, repo, commits[0].sha, commits[-1].sha,
                             local.fingerprint().machine_id)
    last = len(commits) - 1
    for sample in found:
        store.add_bisect_sample(bisection_id, BisectSample(sample.endpoint * last, HISTORY, sample.value,
                                                           sample.run_id))
    for endpoint, name in ((0, "good"), (1, "bad")):
        runs = sorted({s.run_id for s in found if s.endpoint == endpoint})
        if runs:
            count = sum(s.endpoint == endpoint for s in found)
            errors.print(f"history: {count} stored samples of {metric} at the {name} commit "
                         f"(runs {', '.join(map(str, runs))})")


@bisect_app.command("resume")
def resume(
    bisection_id: Annotated[int, typer.Argument(help="Bisection id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Continue a bisection after Ctrl-C or a crash; no finished measurement is repeated."""
    store = open_store()
    record = _record(store, bisection_id)
    commits = _commits(record)
    _run(store, record.id, commits, as_json)


@bisect_app.command("status")
def status(bisection_id: Annotated[int | None, typer.Argument(help="Bisection id (default: newest).")] = None) -> None:
    """Runs so far, the most probable commits, and the next probe."""
    from perfline.bisect.driver import replay

    store = open_store()
    record = _record(store, bisection_id)
    bisection = replay(store, record)
    commits = _commits(record)
    posterior = bisection.posterior()
    console.print(f"bisection {record.id} ({record.status}): {len(commits)} commits, {bisection.runs} runs "
                  f"of at most {record.spec.max_runs}, {len(store.bisect_builds(record.id))} builds")
    _print_kind(record.spec)
    table = Table(title="most probable first bad commits", title_justify="left")
    for column in ("commit", "subject", "P(first bad)", "samples"):
        table.add_column(column)
    for index in np.argsort(posterior)[::-1][:5]:
        if posterior[index] <= 0:
            break
        commit = commits[int(index)]
        table.add_row(commit.sha[:12], commit.subject, f"{posterior[index]:.3f}",
                      str(len(bisection.samples_at(int(index)))))
    console.print(table)
    probe = bisection.next_probe()
    console.print("next probe: " + (f"{commits[probe].sha[:12]} {commits[probe].subject}" if probe is not None
                                    else "none, the bisection has concluded"))
    if record.result:
        console.print_json(data=record.result)


@bisect_app.command("log")
def log(bisection_id: Annotated[int | None, typer.Argument(help="Bisection id (default: newest).")] = None) -> None:
    """Every probe: commit, sample, phase; and every build."""
    store = open_store()
    record = _record(store, bisection_id)
    commits = _commits(record)
    _print_kind(record.spec)
    console.print(_probes_table(store, record, commits))
    builder = _builder(record)
    full_logs = isinstance(builder, kernel.KernelBuilder)
    builds = Table(title="builds", title_justify="left")
    for column in ("commit", "result", "seconds", "log (tail)", *(("full log",) if full_logs else ())):
        builds.add_column(column, overflow="fold")
    for build in store.bisect_builds(record.id):
        sha = commits[build.commit_index].sha
        row = [sha[:12], "ok" if build.ok else "failed: untestable", f"{build.seconds:.1f}",
               "" if build.ok else build.log_tail[-300:]]
        if isinstance(builder, kernel.KernelBuilder):
            full = builder.log_path(sha)
            row.append(str(full) if full.is_file() else "")
        builds.add_row(*row)
    console.print(builds)


def _probes_table(store: Store, record: BisectionRecord, commits: list[Commit]) -> Table:
    """Every sample, and the most probable first bad commit after it: what it concluded."""
    from perfline.bisect.driver import trace

    table = Table(title=f"bisection {record.id} probes", title_justify="left")
    for column in ("#", "commit", "subject", "phase", "value", "run", "then most probable", "P"):
        table.add_column(column)
    for number, step in enumerate(trace(store, record), start=1):
        sample = step.sample
        commit = commits[sample.commit_index]
        concluded = ("", "") if step.culprit is None else (commits[step.culprit].sha[:12], f"{step.probability:.3f}")
        table.add_row(str(number), commit.sha[:12], commit.subject, sample.phase, f"{sample.value:.6g}",
                      str(sample.run_id or ""), *concluded)
    return table


def _print_kind(spec: BisectionSpec) -> None:
    """Which kind of bisection: the build command alone does not say it plainly."""
    if spec.kernel_config is None:
        console.print(f"builds with: {escape(spec.build)}", highlight=False, soft_wrap=True)
        return
    source = f" (copied from {spec.kernel_config_source})" if spec.kernel_config_source else ""
    console.print(f"kernel bisection: each commit's bzImage built with config {spec.kernel_config}{source}, "
                  "booted with the job", highlight=False, soft_wrap=True)


def _builder(record: BisectionRecord) -> Builder:
    spec = record.spec
    if spec.kernel_config is None:
        return Builder(Path(spec.repo), spec.build)
    return kernel.KernelBuilder(Path(spec.repo), spec.build,
                                announce=lambda message: errors.print(escape(message), highlight=False))


def _run(store: Store, bisection_id: int, commits: list[Commit], as_json: bool) -> None:
    from perfline.bisect.driver import BisectError, drive
    from perfline.records.status import BisectionStatus
    from perfline.system.speed import PaceGuard

    record = store.bisection(bisection_id)
    spec = record.spec
    try:
        if spec.kernel_config is not None:
            kernel.check_resumable(Path(spec.kernel_config))
    except kernel.KernelBisectError as exc:
        raise fail(str(exc)) from None
    builder = _builder(record)
    guard = PaceGuard()
    try:
        guard.settle()
    except ToolMissing as exc:
        raise fail(str(exc)) from None
    with _progress(spec.max_runs) as update, _measure(store, record, builder) as measure:
        try:
            outcome = drive(store, record.id, builder, commits, measure, update, guard)
        except BisectError as exc:
            raise fail(str(exc), EXIT_FAILED) from None
    if as_json:
        print(json.dumps(outcome.to_json(), indent=2))
    else:
        console.print(_probes_table(store, outcome.record, commits))
        _print_outcome(outcome, commits)
    if outcome.result.status is not BisectionStatus.FOUND:
        raise typer.Exit(EXIT_FAILED)


@contextmanager
def _progress(max_runs: int) -> Iterator[object]:
    progress = Progress(TextColumn("[bold]bisect"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("P(top)={task.fields[top]:.3f}  {task.description}"),
                        TimeElapsedColumn(), console=errors)
    task = progress.add_task("", total=max_runs, top=0.0)

    def update(event: str, runs: int, top: float) -> None:
        progress.update(task, completed=runs, description=event, top=top)

    with progress:
        yield update


@contextmanager
def _measure(store: Store, record: BisectionRecord, builder: Builder) -> Iterator[Measure]:
    from perfline.bisect.driver import MeasureFailed

    spec = record.spec
    if spec.command is not None:
        command = spec.command

        def measure_command(commit: Commit, index: int) -> tuple[float, int | None]:
            return _run_command(command, _built_tree(builder, commit.sha)), None

        yield measure_command
        return
    assert spec.job is not None
    case = _job_case(Path(spec.job), booted=isinstance(builder, kernel.KernelBuilder))

    def case_at(commit: Commit) -> Case:
        """The case as it runs at this commit: with its own kernel, for a kernel tree."""
        if not isinstance(builder, kernel.KernelBuilder):
            # The job's benchmark finds the built tree here, e.g. `cmd: $PERFLINE_TREE/bench`.
            os.environ["PERFLINE_TREE"] = str(_built_tree(builder, commit.sha))
            return case
        try:
            built = kernel.register(builder.kept(commit.sha), record.id, commit.sha)
        except (kernel.KernelBisectError, KernelError) as exc:
            raise MeasureFailed(str(exc)) from exc
        return kernel.with_kernel(case, built.name)

    with running(store, [case], f"bisect-{record.id}", None) as ctx:

        def measure_job(commit: Commit, index: int) -> tuple[float, int | None]:
            here = case_at(commit)
            # The progress display knows the job's case; a probe's differs only in its kernel.
            observer = ctx.observer if here == case else _SameCase(ctx.observer, case)
            outcome = execute(here, replace(ctx, kernel_commit=commit.sha, observer=observer))
            if outcome.status != RunStatus.COMPLETED:
                raise MeasureFailed(outcome.error or outcome.status)
            values = [s.value for s in store.get_run(outcome.run_id).samples if s.metric.name == spec.metric]
            if not values:
                raise MeasureFailed(f"run {outcome.run_id} has no samples of {spec.metric}")
            return float(np.mean(values)), outcome.run_id

        yield measure_job


class _SameCase:
    """An observer that reports every run as the job's own case."""

    def __init__(self, inner: Observer, case: Case) -> None:
        self.inner, self.case = inner, case

    def run_started(self, run_id: int, case: Case) -> None:
        self.inner.run_started(run_id, self.case)

    def warning(self, message: str) -> None:
        self.inner.warning(message)

    def step_done(self, run_id: int, repetition: int | None, values: list[Measurement]) -> None:
        self.inner.step_done(run_id, repetition, values)

    def run_finished(self, outcome: RunOutcome) -> None:
        self.inner.run_finished(replace(outcome, case=self.case))


def _job_case(job: Path, booted: bool) -> Case:
    """The job's one case, measured once per probe; `booted`: as a VM of each build."""
    try:
        [case] = [replace(c, repeat=1, warmup=0, precision_pct=None) for c in expand(load_job(job))]
    except JobError as exc:
        hint = ""
        if booted and "target qemu needs a kernel" in exc.message:
            hint = ("; with --kernel-tree any registered kernel will do, each probe boots its own "
                    "build (or make the job local: it then boots with the VM defaults)")
        raise fail(f"{exc}{hint}") from None
    except ValueError as exc:
        raise fail(f"{job}: a bisection job must have exactly one case ({exc})") from None
    if not booted:
        return case
    try:
        return kernel.vm_case(case, str(job))
    except (JobError, kernel.KernelBisectError, ToolMissing) as exc:
        raise fail(str(exc)) from None


def _built_tree(builder: Builder, sha: str) -> Path:
    """The commit's worktree, built: built again if it was deleted or cut short since."""
    from perfline.bisect.driver import MeasureFailed

    built = builder.build(sha)
    if not built.ok:
        raise MeasureFailed(f"{sha[:12]} no longer builds:\n{built.log_tail}")
    return builder.tree(sha)


def _run_command(command: str, tree: Path) -> float:
    from perfline.bisect.driver import MeasureFailed

    try:
        proc = subprocess.run(["/bin/sh", "-c", command], cwd=tree, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise MeasureFailed(f"{command!r} timed out after {COMMAND_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0:
        raise MeasureFailed(f"{command!r} exited {proc.returncode}: {tail(proc.stderr or proc.stdout, 5)}")
    lines = proc.stdout.strip().splitlines()
    try:
        value = float(lines[-1]) if lines else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise MeasureFailed(f"the last line of {command!r}'s stdout is not a number: {lines[-1:]!r}")
    return value


def _direction(direction: str | None, job: Path | None, metric: str | None) -> Direction:
    if direction is not None:
        if direction not in ("lower", "higher"):
            raise fail("--direction must be lower or higher")
        return Direction(direction)
    if job is not None and metric is not None:
        try:
            benchmark = BENCHMARKS.get(load_job(job).benchmark)
        except JobError as exc:
            raise fail(str(exc)) from None
        for known in benchmark.metrics:
            if known.name == metric:
                return known.direction
        raise fail(f"{metric} is not a metric of {benchmark.name} "
                   f"({', '.join(m.name for m in benchmark.metrics)}); or give --direction")
    raise fail("--command needs --direction lower|higher")


def _record(store: Store, bisection_id: int | None) -> BisectionRecord:
    try:
        return store.bisection(bisection_id)
    except BisectionNotFound as exc:
        raise fail(str(exc)) from None


def _commits(record: BisectionRecord) -> list[Commit]:
    try:
        found = commit_range(Path(record.spec.repo), record.spec.commits[0], record.spec.commits[-1])
    except RangeError as exc:
        raise fail(str(exc)) from None
    if [c.sha for c in found] != record.spec.commits:
        raise fail(f"{record.spec.repo}: the range's history changed since the bisection started")
    return found


def _print_outcome(outcome: Outcome, commits: list[Commit]) -> None:
    from perfline.records.status import BisectionStatus

    document = outcome.to_json()
    if outcome.result.status is BisectionStatus.NO_CHANGE:
        console.print(f"[yellow]no change to bisect:[/yellow] after {document['runs']} runs the good and bad "
                      "commits do not differ beyond their noise")
        return
    culprit = commits[outcome.result.culprit]
    console.print(f"[bold]first bad commit:[/bold] {culprit.sha}\n  {culprit.subject}  ({culprit.author})")
    if len(outcome.result.suspects) > 1:
        console.print("  (its parents up to the last good commit did not build: "
                      + ", ".join(s[:12] for s in document["suspects"]) + ")")
    low, high = document["ci_pct"]
    console.print(f"  {outcome.result.kind.value}: {document['change_pct']:+.2f}% [{low:+.2f}, {high:+.2f}] "
                  f"(95% CI), posterior probability {outcome.result.probability:.4f}, "
                  f"status {outcome.result.status.value}")
    if outcome.confirmation is not None:
        c = outcome.confirmation
        console.print(f"  A/B against its parent: {c.decision.value}, {c.change_pct:+.2f}% "
                      f"[{c.ci_pct[0]:+.2f}, {c.ci_pct[1]:+.2f}], p={c.p_value:.2g}, {c.samples} samples")
    if outcome.result.status is BisectionStatus.UNCONFIRMED:
        parent = commits[outcome.result.parent].sha[:12]
        console.print(f"  [yellow]not confirmed:[/yellow] the model is sure, but this commit's own samples do "
                      f"not differ from its parent's; check with `perfline ab` on {parent} and {culprit.sha[:12]} "
                      "before acting on it (a machine whose speed drifted does this)")
    elif outcome.result.status is BisectionStatus.BUDGET:
        console.print(f"  [yellow]budget spent:[/yellow] the best guess after {document['runs']} runs; "
                      f"`perfline bisect status {outcome.record.id}` lists the most probable commits")
    again = f", {outcome.unsteady} more taken again with the machine running slow" if outcome.unsteady else ""
    console.print(f"  {document['runs']} benchmark runs, {outcome.builds} builds{again}")
