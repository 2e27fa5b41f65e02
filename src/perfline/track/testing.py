"""Testing a tracker's commits: which are pending, building each, running every case.

A commit is tested when every case of every job has a completed run labelled with the
tracker's name at that commit on this machine; that is all the state there is, so a
kill at any moment costs at most the run in progress, which the next `track run` does
again, and never a second run of a finished case.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from perfline import git
from perfline.builds import kernel
from perfline.builds.worktree import Builder
from perfline.jobs import expand
from perfline.records.job import Case
from perfline.records.status import RunStatus
from perfline.runner import RunContext, execute
from perfline.runner.kexec_resume import THIS_MACHINE, BootSteps
from perfline.store import Store
from perfline.track import kexec_tests
from perfline.track.budget import Budget
from perfline.track.machines import Measuring
from perfline.track.selection import selected
from perfline.track.tracker_file import TrackerSpec

Notify = Callable[[str], None]
# A case that failed this many times, each on its own build, makes its commit untestable:
# a failure, then a fresh checkout built again and one more run (a half-written build
# output, a benchmark's rare crash: neither may condemn a commit).
UNTESTABLE_AFTER = 2


def cases(spec: TrackerSpec) -> list[Case]:
    """Every case of every job, as each tested commit runs them."""
    found = [case for job in spec.jobs for case in expand(job.spec)]
    if spec.kernel_config is None:
        if booting := [case for case in found if case.target == "kexec"]:
            raise spec.error("jobs", f"{booting[0].job}: target kexec boots each tested commit's kernel on this "
                                     "machine, which a tracker builds with build: {kernel: {config: FILE}}")
        return found
    # On the fleet, a machine of the class boots each build (target kexec); here, a VM
    # does, or this machine itself for a job of target kexec (track.kexec_tests).
    return [kernel.kexec_case(case, str(spec.path)) if spec.fleet_class is not None or case.target == "kexec"
            else kernel.vm_case(case, str(spec.path)) for case in found]


def builder_for(spec: TrackerSpec, repo: Path, notify: Notify) -> Builder:
    """The bisections' builder, so a tracked commit built once is built for both."""
    if spec.kernel_config is None:
        assert spec.build is not None
        return Builder(repo, spec.build, announce=notify)
    return kernel.KernelBuilder(repo, kernel.build_command(kernel.keep_config(spec.kernel_config)), announce=notify)


def pending(spec: TrackerSpec, repo: Path, history: list[git.Commit], branch: str, store: Store,
            where: Measuring, builder: Builder, now: datetime) -> list[git.Commit]:
    """Selected commits not yet tested, oldest first; a commit whose build failed before
    is left out (it would fail again; a new build command builds it anew), and so is one
    a case of which failed on two builds, or whose kernel did not boot (untestable)."""
    wanted = {(case.benchmark, case.key) for case in cases(spec)}
    done = store.completed_cases(spec.name, where.machine_ids)
    failed = store.failed_cases(spec.name, where.machine_ids)
    not_booting = store.boot_failed_commits(spec.name)
    tagged = {sha for _, sha in git.tags(repo, spec.select.tags, branch)} if spec.select.tags else set()
    _, newest = store.runs_started([spec.name], datetime.min.replace(tzinfo=now.tzinfo))
    chosen = selected(spec.select, history, tagged, newest, now)
    return [c for c in chosen
            if not wanted <= done.get(c.sha, set()) and not _failed_before(builder, c.sha)
            and not any(n >= UNTESTABLE_AFTER for n in failed.get(c.sha, {}).values()) and c.sha not in not_booting]


def _failed_before(builder: Builder, sha: str) -> bool:
    build = builder.recorded(sha)
    return build is not None and not build.ok


def at_commit(spec: TrackerSpec, builder: Builder, ctx: RunContext, sha: str, label: str
              ) -> tuple[RunContext, Callable[[Case], Case]]:
    """Where a built commit's cases run, and each case as it runs there: a kernel
    tracker registers the commit's bzImage (`track-NAME-SHA12`) and boots it (in a VM, or
    this machine for a case of target kexec), any other runs in the commit's worktree."""
    here = replace(ctx, label=label, kernel_commit=sha)
    if isinstance(builder, kernel.KernelBuilder):
        name = kernel.register(builder.kept(sha), f"track-{spec.name}-{sha[:12]}", sha).name
        return here, lambda case: (replace(case, boot_kernel=name) if case.target == "kexec"
                                   else kernel.with_kernel(case, name))
    return replace(here, tree=builder.tree(sha)), lambda case: case


@dataclass(frozen=True)
class Tested:
    commit: git.Commit
    runs: int  # runs started
    complete: bool  # every case has a completed run now
    problem: str | None = None


def test_commit(spec: TrackerSpec, commit: git.Commit, store: Store, builder: Builder, ctx: RunContext,
                where: Measuring, budget: Budget, notify: Notify, boot_steps: BootSteps = THIS_MACHINE) -> Tested:
    """Build the commit and run every case it has no completed run of, within the budget.
    A case of target kexec is a boot of the commit's kernel: MachineBooting stops the
    pass, and `perfline resume` carries it on after the boot (track.kexec_tests)."""
    built = builder.build(commit.sha)
    if not built.ok:
        notify(f"{commit.sha[:12]} ({commit.subject}) does not build; left out:\n{built.log_tail}")
        return Tested(commit, 0, False, "does not build")
    done = store.completed_cases(spec.name, where.machine_ids).get(commit.sha, set())
    failed = store.failed_cases(spec.name, where.machine_ids).get(commit.sha, Counter())
    runs = 0
    for case in cases(spec):
        key = (case.benchmark, case.key)
        if key in done:
            continue
        for attempt in range(failed[key], UNTESTABLE_AFTER):
            if budget.left() == 0:
                return Tested(commit, runs, False, "budget spent for today")
            # The run before failed: from a fresh checkout, so that nothing an earlier
            # build or run left in the tree (or a kill between the two) decides.
            if attempt > 0 and not builder.rebuild(commit.sha).ok:
                notify(f"{commit.sha[:12]} ({commit.subject}) no longer builds from a fresh checkout")
                return Tested(commit, runs, False, "does not build")
            here, on_commit = at_commit(spec, builder, ctx, commit.sha, spec.name)
            if case.target == "kexec":
                kexec_tests.boot(store, spec.name, on_commit(case), commit.sha, boot_steps)
            builder.settle()
            runs += 1
            outcome = execute(on_commit(case), here)
            if outcome.status == RunStatus.COMPLETED:
                break
            notify(f"{commit.sha[:12]}: run {outcome.run_id} of {case.benchmark} {outcome.status}: {outcome.error}")
            if outcome.status != RunStatus.FAILED:
                return Tested(commit, runs, False, f"run {outcome.run_id} {outcome.status}")
            if attempt + 1 < UNTESTABLE_AFTER:
                notify(f"{commit.sha[:12]}: building it again from a fresh checkout and running once more")
        else:
            notify(f"{commit.sha[:12]} ({commit.subject}) is untestable: {case.benchmark} failed on "
                   f"{max(failed[key], UNTESTABLE_AFTER)} builds (each failed run keeps its output: perfline runs, perfline show ID)")
            return Tested(commit, runs, False, "untestable")
    return Tested(commit, runs, True)
