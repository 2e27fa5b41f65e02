"""A bisection from its request to its end: check the request, load the job once,
store the bisection with its range and its endpoints' history, then build, measure
and record until it concludes; resume one after Ctrl-C or a crash.

The command line only parses options into a `StartRequest`, calls `start` and `run`
and prints what they return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from perfline import git
from perfline.benchmarks import BENCHMARKS
from perfline.bisect.driver import HISTORY, BisectError, Outcome, Progress, drive
from perfline.bisect.endpoints import endpoint_history
from perfline.bisect.measure import command_job, measurement, probe_case
from perfline.builds import kernel
from perfline.builds.worktree import Builder
from perfline.jobs import load_job
from perfline.records.errors import UserError
from perfline.records.job import Case, JobError, JobSpec
from perfline.records.metric import Direction
from perfline.records.status import BisectionStatus
from perfline.runner.kexec_resume import THIS_MACHINE, BootSteps
from perfline.store import Store
from perfline.store.bisections import BisectionRecord, BisectionSpec, BisectSample
from perfline.system.speed import PATIENCE_S, TOLERANCE, PaceGuard
from perfline.targets import kexec, local, machine_settings

Notify = Callable[[str], None]


class BisectionFailed(RuntimeError):
    """The bisection stopped; `record` says whether it failed for good or can resume."""

    def __init__(self, message: str, record: BisectionRecord) -> None:
        super().__init__(message)
        self.record = record


@dataclass(frozen=True)
class StartRequest:
    good: str
    bad: str
    repo: Path | None = None
    build: str | None = None
    kernel_tree: Path | None = None
    config: Path | None = None
    command: str | None = None
    direction: str | None = None
    job: Path | None = None
    metric: str | None = None
    max_runs: int = 200
    history: bool = True
    # Each probe boots a lab machine into its build, whatever the job's target (a kernel
    # tracker's bisection on its fleet: the machine checks its own boots, not this host).
    on_lab: bool = False


def _check(request: StartRequest) -> None:
    if request.kernel_tree is not None:
        if request.repo is not None or request.build is not None:
            raise UserError("--kernel-tree builds with make olddefconfig and make bzImage: it excludes --repo "
                            "and --build")
        if request.command is not None or request.job is None:
            raise UserError("--kernel-tree boots each build with a job: give --job JOB --metric M, not --command")
        if request.config is None:
            raise UserError("--kernel-tree needs --config FILE, the .config every commit is built with")
    else:
        if request.config is not None:
            raise UserError("--config applies only to --kernel-tree")
        if request.repo is None or request.build is None:
            raise UserError("give --repo DIR and --build CMD, or --kernel-tree DIR and --config FILE")
    if (request.command is None) == (request.job is None):
        raise UserError("give either --command (with --direction) or --job (with --metric)")
    if request.job is not None and request.metric is None:
        raise UserError("--job needs --metric, e.g. --metric sched-pipe.usecs_per_op")
    if request.direction is not None and request.direction not in ("lower", "higher"):
        raise UserError("--direction must be lower or higher")
    if request.command is not None and request.direction is None:
        raise UserError("--command needs --direction lower|higher")


def _job(request: StartRequest) -> JobSpec:
    """The job file, loaded once; with --command, the `command` benchmark's job."""
    if request.job is None:
        assert request.command is not None and request.direction is not None
        return command_job(request.command, request.direction)
    with _kernel_hint(request.kernel_tree is not None):
        return load_job(request.job)


def _case(job: JobSpec, booted: bool, on_lab: bool = False) -> Case:
    """The job's one case, measured once per probe; `booted`: as a VM of each build, or
    with target kexec as this machine booted into each build (bisect.kexec_probe);
    `on_lab`: as a lab machine of a kernel tracker's fleet boots each build (kexec)."""
    with _kernel_hint(booted):
        case = probe_case(job)
    if on_lab:
        return kernel.kexec_case(case, str(job.path))
    return kernel.vm_case(case, str(job.path)) if booted and case.target != "kexec" else case


@contextmanager
def _kernel_hint(booted: bool) -> Iterator[None]:
    """A job of a kernel bisection asks for a VM without a kernel: say that any will do."""
    try:
        yield
    except JobError as exc:
        if booted and "needs a kernel" in exc.message:
            raise UserError(f"{exc}; with --kernel-tree any registered kernel will do, each probe boots its own "
                            "build (or make the job local: it then boots with the VM defaults)") from None
        raise


def _direction(request: StartRequest, job: JobSpec) -> Direction:
    if request.direction is not None:
        return Direction(request.direction)
    benchmark = BENCHMARKS.get(job.benchmark)
    for known in benchmark.metrics:
        if known.name == request.metric:
            return known.direction
    raise UserError(f"{request.metric} is not a metric of {benchmark.name} "
                    f"({', '.join(m.name for m in benchmark.metrics)}); or give --direction")


def start(store: Store, request: StartRequest, notify: Notify) -> BisectionRecord:
    """Check the request and store the bisection (its range, and the endpoints' stored
    runs of a --job as history); `run` then carries it out."""
    _check(request)
    booted = request.kernel_tree is not None
    job = _job(request)
    case = _case(job, booted, request.on_lab)
    if case.target == "kexec" and not request.on_lab:
        # Before anything is stored: a machine that may not boot the probes' kernels refuses now.
        kexec.require_boot_allowed(machine_settings.load())
    direction = _direction(request, job)
    tree = request.kernel_tree or request.repo
    assert tree is not None
    commits = git.first_parent_range(tree, request.good, request.bad)
    store.remember_commits(commits)  # its reports stand on their own when the tree is gone
    build, kept_config = request.build, None
    if booted:
        assert request.config is not None
        kernel.check_tree(tree, commits[0].sha)
        kept_config = kernel.keep_config(request.config)
        build = kernel.build_command(kept_config)
    assert build is not None
    bisection_id = store.create_bisection(BisectionSpec(
        repo=str(tree.resolve()), good=request.good, bad=request.bad, commits=[c.sha for c in commits],
        build=build, command=request.command, job=str(request.job.resolve()) if request.job else None,
        metric=request.metric or "command.value", direction=direction.value, max_runs=request.max_runs,
        kernel_config=str(kept_config) if kept_config else None,
        kernel_config_source=str(request.config.resolve()) if kept_config and request.config else None,
    ))
    notify(f"bisection {bisection_id}: {len(commits)} commits from {request.good} to {request.bad}; "
           f"`perfline bisect resume {bisection_id}` continues it if interrupted")
    if request.history and request.job is not None and not booted:
        _record_history(store, bisection_id, case, request.metric or "", tree, commits, notify)
    return store.bisection(bisection_id)


def _record_history(store: Store, bisection_id: int, case: Case, metric: str, repo: Path,
                    commits: list[git.Commit], notify: Notify) -> None:
    """The endpoints' stored samples, recorded once as the bisection's first samples, so
    that a resume replays the same evidence whatever runs are stored later."""
    found = endpoint_history(store, case, metric, repo, commits[0].sha, commits[-1].sha,
                             local.machine_id())
    last = len(commits) - 1
    for sample in found:
        store.add_bisect_sample(bisection_id, BisectSample(sample.endpoint * last, HISTORY, sample.value,
                                                           sample.run_id))
    for endpoint, name in ((0, "good"), (1, "bad")):
        runs = sorted({s.run_id for s in found if s.endpoint == endpoint})
        if runs:
            count = sum(s.endpoint == endpoint for s in found)
            notify(f"history: {count} stored samples of {metric} at the {name} commit "
                   f"(runs {', '.join(map(str, runs))})")


def commits_of(record: BisectionRecord) -> list[git.Commit]:
    """The bisection's commits, as the repository has them now."""
    found = git.first_parent_range(Path(record.spec.repo), record.spec.commits[0], record.spec.commits[-1])
    if [c.sha for c in found] != record.spec.commits:
        raise UserError("the range's history changed since the bisection started", record.spec.repo)
    return found


def builder_for(record: BisectionRecord, notify: Notify) -> Builder:
    spec = record.spec
    if spec.kernel_config is None:
        return Builder(Path(spec.repo), spec.build, announce=notify)
    return kernel.KernelBuilder(Path(spec.repo), spec.build, announce=notify)


def probe_case_of(record: BisectionRecord, booted: bool, on_lab: bool = False) -> Case:
    spec = record.spec
    if spec.job is not None:
        return _case(load_job(spec.job), booted, on_lab)
    assert spec.command is not None
    return _case(command_job(spec.command, spec.direction), booted, on_lab)


def run(store: Store, record: BisectionRecord, progress: Progress, notify: Notify,
        pace_tolerance: float | None = TOLERANCE, allowed: Callable[[], bool] | None = None, *,
        patience_s: float = PATIENCE_S, boot_steps: BootSteps = THIS_MACHINE, on_lab: bool = False,
        builder: Builder | None = None) -> Outcome:
    """Carry the bisection out from where its stored samples leave it to its end.

    A bisection that cannot start (an endpoint does not build or cannot be measured) is
    stored as failed; one stopped by a machine that stays slow stays running, to resume.
    Either raises BisectionFailed. At its end the worktrees it made are removed.
    `allowed`: asked before every probe; False pauses the bisection (resumable).
    `patience_s`: how long a machine that stays slow is waited for before it stops.
    A kernel bisection with target kexec stops (MachineBooting, the bisection running)
    at each probe that boots a kernel; `perfline resume` carries it on after the boot.
    `on_lab`: this is a lab machine of a kernel tracker's fleet, and every probe boots it
    (StartRequest.on_lab); the worker carries the bisection on after each boot.
    `builder`: how the commits are built, when not as the record says here (a fleet
    machine's, with the fleet's shared image directory).
    """
    if record.status == BisectionStatus.FAILED:
        raise UserError(f"bisection {record.id} failed: {(record.result or {}).get('error', '?')}; "
                        "start a new one")
    spec = record.spec
    if spec.kernel_config is not None:
        kernel.check_resumable(Path(spec.kernel_config))
    commits = commits_of(record)
    builder = builder or builder_for(record, notify)
    case = probe_case_of(record, isinstance(builder, kernel.KernelBuilder), on_lab)
    # None: no guard (docs/bisect.md, "Machines whose speed changes"); with target kexec
    # the sample was taken in another boot, so this one's pace says nothing of it.
    guard = (None if pace_tolerance is None or case.target == "kexec"
             else PaceGuard(tolerance=pace_tolerance, patience_s=patience_s))
    if guard is not None:
        guard.settle()
    with measurement(store, record, case, builder, notify, boot_steps) as measure:
        try:
            outcome = drive(store, record.id, builder, commits, measure, progress, guard, allowed)
        except BisectError as exc:
            if exc.fatal:
                store.finish_bisection(record.id, BisectionStatus.FAILED, {"error": str(exc)})
                builder.release([c.sha for c in commits])
            raise BisectionFailed(str(exc), store.bisection(record.id)) from None
    builder.release([c.sha for c in commits])
    return outcome
