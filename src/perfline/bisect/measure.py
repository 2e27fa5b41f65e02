"""How a bisection measures a commit: one sample of its metric, from a run of its case.

Both kinds go through the runner, so every probe is a stored run (label
`bisect-ID`, the commit as its kernel commit) and `--command` keeps the `command`
benchmark's contract (the last stdout line is the value) instead of a second copy of
it. A command or a local job runs in the commit's built worktree with $PERFLINE_TREE
naming it; a kernel bisection's job boots the commit's own bzImage in a VM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

from perfline.bisect import kexec_probe
from perfline.bisect.driver import Measure, MeasureFailed
from perfline.builds import kernel
from perfline.builds.worktree import Builder
from perfline.git import Commit
from perfline.jobs import expand, job_from_benchmark
from perfline.records.errors import UserError
from perfline.records.job import Case, JobSpec
from perfline.records.metric import Measurement
from perfline.records.status import RunStatus
from perfline.runner import RunContext, RunOutcome, execute
from perfline.runner.kexec_resume import THIS_MACHINE, BootSteps
from perfline.store import Store
from perfline.store.bisections import BisectionRecord
from perfline.targets import local
from perfline.targets.kernels import KernelError

Notify = Callable[[str], None]
# A shell's status for a command it could not find (127) or not execute (126).
_NOT_FOUND = ("exited with status 127", "exited with status 126")


def probe_case(job: JobSpec) -> Case:
    """The job's one case as a probe measures it: one repetition, no warm-up."""
    cases = expand(job)
    if len(cases) != 1:
        raise UserError(f"a bisection job must have exactly one case, this one has {len(cases)}",
                        job.path or job.name)
    return replace(cases[0], repeat=1, warmup=0, precision_pct=None)


def command_job(command: str, direction: str) -> JobSpec:
    """`--command` as a `command` benchmark job: no monitors, the value's direction."""
    return job_from_benchmark("command", {"cmd": command, "direction": direction}, repeat=1, warmup=0,
                              monitors=())


class _Quiet:
    """The runner's observer for probes: the bisection draws its own progress; only
    warnings (a monitor unavailable, a VM fallback) are passed on."""

    def __init__(self, notify: Notify) -> None:
        self.notify = notify

    def run_started(self, run_id: int, case: Case) -> None:
        pass

    def warning(self, message: str) -> None:
        self.notify(message)

    def step_started(self, run_id: int, repetition: int | None) -> None:
        pass

    def step_done(self, run_id: int, repetition: int | None, values: list[Measurement]) -> None:
        pass

    def run_finished(self, outcome: RunOutcome) -> None:
        pass


@contextmanager
def measurement(store: Store, record: BisectionRecord, case: Case, builder: Builder,
                notify: Notify, boot_steps: BootSteps = THIS_MACHINE) -> Iterator[Measure]:
    """The bisection's Measure: build (or find built) the commit, run the case there. A
    case of target kexec is measured in a boot of the commit's kernel (kexec_probe)."""
    spec = record.spec
    ctx = RunContext(store=store, fingerprint=local.fingerprint, observer=_Quiet(notify), label=f"bisect-{record.id}")

    def measure(commit: Commit, tree_index: int) -> tuple[float, int | None]:
        here, tree = case, None
        if isinstance(builder, kernel.KernelBuilder):
            try:
                built = kernel.register(builder.kept(commit.sha), kernel.kernel_name(record.id, commit.sha), commit.sha)
            except (kernel.KernelBisectError, KernelError) as exc:
                raise MeasureFailed(str(exc)) from exc
            if case.target == "kexec":
                run_id = kexec_probe.probe(store, record, case, built.name, commit.sha, tree_index, boot_steps)
                return _value(store, run_id, spec.metric, spec.command, None), run_id
            here = kernel.with_kernel(case, built.name)
        else:
            tree = built_tree(builder, commit.sha)
        builder.settle()
        outcome = execute(here, replace(ctx, kernel_commit=commit.sha, tree=tree))
        return _value(store, outcome.run_id, spec.metric, spec.command, tree), outcome.run_id

    yield measure


def _value(store: Store, run_id: int, metric: str, command: str | None, tree: Path | None) -> float:
    """A probe's sample: the mean of the run's values of the metric."""
    run = store.get_run(run_id)
    if run.info.status != RunStatus.COMPLETED:
        raise MeasureFailed(_why(run.info.status, run.error, command, tree), run_id)
    values = [s.value for s in run.samples if s.metric.name == metric]
    if not values:
        raise MeasureFailed(f"run {run_id} has no samples of {metric}", run_id)
    return float(np.mean(values))


def built_tree(builder: Builder, sha: str) -> Path:
    """The commit's worktree, built: built again if it was deleted or cut short since."""
    built = builder.build(sha)
    if not built.ok:
        raise MeasureFailed(f"{sha[:12]} no longer builds:\n{built.log_tail}")
    return builder.tree(sha)


def _why(status: str, error: str | None, command: str | None, tree: Path | None) -> str:
    error = error or status
    if command is not None and tree is not None and any(s in error for s in _NOT_FOUND):
        return (f"{error}, run in the commit's worktree {tree}: the command runs where the program under "
                f"test is built, so a script of your own needs an absolute path (e.g. $PWD/"
                f"{command.split()[0].removeprefix('./')}) or one under $PERFLINE_TREE")
    return error
