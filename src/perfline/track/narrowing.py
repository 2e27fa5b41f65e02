"""Narrowing a tracker's regression: confirm it on fresh interleaved runs of its two
tested commits, then bisect the commits between them, within the day's budget.

The record says how far it got (status, bisection id, culprit), and a bisection
resumes from its stored samples, so a kill at any point loses only the run in progress.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from perfline import git
from perfline.analysis import kexec_confirm, sequential_confirmation
from perfline.analysis.regressions import CannotConfirm, Reproduction, transition, why_label
from perfline.bisect import session
from perfline.bisect.driver import Progress
from perfline.bisect.merges import MAX_DEPTH, MergedBranch, merged_branch
from perfline.bisect.session import BisectionFailed, StartRequest
from perfline.builds.worktree import Builder
from perfline.git import commit_info
from perfline.jobs import expand
from perfline.monitors import MONITORS, MonitorUnavailable
from perfline.records.job import Case
from perfline.records.status import BisectionStatus, RegressionStatus, RunStatus
from perfline.runner import RunContext, execute_interleaved
from perfline.runner.kexec_resume import THIS_MACHINE, BootSteps
from perfline.stats.sequential import SequentialPlan
from perfline.store import Regression, Store, Suspect
from perfline.store.bisections import BisectionRecord
from perfline.system.process import CommandFailed
from perfline.targets.kernels import cache_dir
from perfline.track.budget import Budget
from perfline.track.testing import at_commit, cases
from perfline.track.tracker_file import TrackedJob, TrackerSpec

if TYPE_CHECKING:
    from perfline.fleet.queue import FleetQueue

Notify = Callable[[str], None]
# An interleaved confirmation stops at the first look that decides, at most this many
# pairs: a change big enough to matter is decided in 6-9 (stats.sequential). One still
# inconclusive after all of them ends the record `false-alarm`, "not confirmed" (a
# screened pair is often a chance one; retrying it each pass would cost this much a
# day); one cut short by the day's budget stays `new` and is tried again.
CONFIRM_MAX_PAIRS = 20
# A record opened at p < 0.01 (the neighbour test or a change point, not the screen) is
# rarely a chance one; a small step in noisy data (3% at 3% per sample) needs about 30
# pairs to show again, so it may take this many (bench/track_sim.py).
CONFIRM_MAX_PAIRS_STRICT = 40
STRICT_ALPHA = 0.01
# A bisection of a tracker's range: the budget caps it too, day by day.
BISECT_MAX_RUNS = 200
# The profiled A/B of culprit and parent: enough repetitions for an interval of each
# symbol's share.
WHY_PAIRS = 6
PROFILE = "perf-profile"


def narrow(store: Store, spec: TrackerSpec, regression: Regression, repo: Path, builder: Builder,
           ctx: RunContext, budget: Budget, progress: Progress, notify: Notify,
           pace_tolerance: float | None, queue: FleetQueue | None = None,
           boot_steps: BootSteps = THIS_MACHINE) -> Regression:
    """Take the record one step further as far as the budget allows: new -> confirmed
    (or false-alarm) -> bisected with its culprit. With `queue` (a fleet tracker), the
    confirmation and the bisection run on a machine of its class; the profiled A/B of
    the culprit is not taken there (perf's profile is this machine's to take). A job of
    target kexec confirms and bisects over boots of this machine (MachineBooting stops
    the pass at each; analysis.kexec_confirm, bisect.kexec_probe)."""
    if regression.status == RegressionStatus.NEW:
        regression = _confirm(store, spec, regression, builder, ctx, budget, notify, queue, boot_steps)
    if regression.status == RegressionStatus.CONFIRMED:
        regression = _bisect(store, spec, regression, repo, budget, progress, notify, pace_tolerance, queue,
                             boot_steps)
    # A range has no one commit to profile against its parent.
    if (regression.status == RegressionStatus.BISECTED and regression.culprit is not None and queue is None
            and not store.find_runs(label=why_label(regression.id), status=RunStatus.COMPLETED)):
        _explain(store, spec, regression, repo, builder, ctx, budget, notify)
    return regression


def _explain(store: Store, spec: TrackerSpec, regression: Regression, repo: Path, builder: Builder,
             ctx: RunContext, budget: Budget, notify: Notify) -> None:
    """Why: the culprit and its parent interleaved with the perf-profile monitor, so the
    report can show which functions' share of CPU time moved. Skipped, with the reason,
    where perf cannot profile (no perf, kernel addresses hidden) or in a VM target."""
    assert regression.culprit is not None
    if budget.left() < 2 or spec.kernel_config is not None:
        return
    try:
        MONITORS.get(PROFILE)().check()
    except MonitorUnavailable as exc:
        notify(f"regression {regression.id}: no profile of the culprit: {exc}")
        return
    if _case(spec, regression).params.get("count"):
        notify(f"regression {regression.id}: no profile of the culprit: its runs are counted, and a profile "
               "of them would show the counter (Valgrind) rather than the program")
        return
    parent = git.resolve(repo, f"{regression.culprit}~1")
    case = replace(_case(spec, regression), monitors=(PROFILE,), warmup=1)
    sides = []
    for sha in (parent, regression.culprit):
        built = builder.build(sha)
        if not built.ok:
            notify(f"regression {regression.id}: {sha[:12]} no longer builds; no profile")
            return
        sides.append(at_commit(spec, builder, ctx, sha, why_label(regression.id))[0])
    notify(f"regression {regression.id}: profiling {regression.culprit[:12]} against its parent {parent[:12]}")
    try:
        execute_interleaved(case, case, WHY_PAIRS, sides[0], ctx_b=sides[1])
    except CommandFailed as exc:
        # perf did not answer its control commands in time (a loaded host, another
        # tool's perf events): the report goes without its "why", the record keeps its culprit.
        notify(f"regression {regression.id}: no profile of the culprit: {exc}")


def _case(spec: TrackerSpec, regression: Regression) -> Case:
    for case in cases(spec):
        if (case.benchmark, case.key) == (regression.benchmark, regression.case_key):
            return case
    raise CannotConfirm(f"the tracker has no job with case {regression.benchmark} {regression.case_key} any more")


def _confirm(store: Store, spec: TrackerSpec, regression: Regression, builder: Builder, ctx: RunContext,
             budget: Budget, notify: Notify, queue: FleetQueue | None, boot_steps: BootSteps) -> Regression:
    if budget.left() < 2:
        return regression
    assert regression.good is not None and regression.bad is not None
    case = replace(_case(spec, regression), monitors=(), warmup=1)
    limit = confirm_pairs(regression.strength)
    pairs = min(limit, max(budget.left() // 2, 6))
    if queue is not None:
        from perfline.track import on_fleet

        return on_fleet.confirm(spec, regression, case, pairs, limit, store, queue, notify)
    sides = []
    for sha in (regression.good, regression.bad):
        built = builder.build(sha)
        if not built.ok:
            notify(f"regression {regression.id}: {sha[:12]} no longer builds; not confirmed")
            return regression
        here, on_commit = at_commit(spec, builder, ctx, sha, spec.name)
        sides.append((on_commit(case), here))
    (before, ctx_before), (after, ctx_after) = sides
    if case.target == "kexec":
        try:
            judged = kexec_confirm.confirm(store, spec.name, regression, before, after, spec.floor_pct, boot_steps)
        except CannotConfirm as exc:
            notify(f"regression {regression.id}: cannot confirm: {exc}")
            return regression
        if judged.status != RegressionStatus.NEW:
            notify(f"regression {judged.id}: {judged.status} ({judged.note})")
        return judged
    plan = SequentialPlan.up_to(limit, STRICT_ALPHA)
    notify(f"regression {regression.id}: confirming {regression.good[:12]} against {regression.bad[:12]} "
           f"interleaved, up to {pairs} pairs")
    try:
        regression, _ = sequential_confirmation.confirm(store, regression, Reproduction(before, after, ({}, {})),
                                                        ctx_before, pairs, plan, ctx_after, notify)
    except CannotConfirm as exc:
        notify(f"regression {regression.id}: cannot confirm: {exc}")
        return regression
    notify(f"regression {regression.id}: {regression.status} ({regression.note})")
    return regression


def confirm_pairs(strength: float) -> int:
    """The most pairs a record's confirmation may take: CONFIRM_MAX_PAIRS for one only
    the screen opened (its p-value, strength = -log10 p, at or above STRICT_ALPHA),
    CONFIRM_MAX_PAIRS_STRICT for one found at STRICT_ALPHA."""
    return CONFIRM_MAX_PAIRS_STRICT if strength > -math.log10(STRICT_ALPHA) else CONFIRM_MAX_PAIRS


def _bisect(store: Store, spec: TrackerSpec, regression: Regression, repo: Path, budget: Budget,
            progress: Progress, notify: Notify, pace_tolerance: float | None,
            queue: FleetQueue | None, boot_steps: BootSteps) -> Regression:
    """The record's bisection carried on to its answer; a culprit that is a merge is
    followed into the branch it brought in (bisect.merges), one bisection a level."""
    record = _bisection_of(store, spec, regression, repo, budget, notify)
    if record is None:
        return regression
    found: list[tuple[BisectionRecord, MergedBranch]] = []  # the merges named, outermost first
    while True:
        record = _carry_out(store, spec, regression, record, budget, progress, notify, pace_tolerance, queue,
                            boot_steps)
        if record is None or record.status == BisectionStatus.RUNNING:
            return regression  # paused (the day's budget, a slow machine) or stopped: the next pass goes on
        culprit = (record.result or {}).get("culprit") if record.status == BisectionStatus.FOUND else None
        branch = merged_branch(repo, culprit) if culprit and len(found) < MAX_DEPTH else None
        if branch is None:
            break
        inner = _bisection_into(store, spec, regression, record, branch, budget, notify)
        if inner is None:
            return regression
        found.append((record, branch))
        record = inner
    steps = [f"bisection {outer.id}: found merge {branch.merge[:12]} {commit_info(repo, branch.merge).subject}; "
             f"into the branch it merged ({branch.fork[:12]}..{branch.tip[:12]}), " for outer, branch in found]
    result = record.result or {}
    culprits: list[str] = result.get("culprits") or ([result["culprit"]] if result.get("culprit") else [])
    if found and (record.status not in (BisectionStatus.FOUND, BisectionStatus.RANGE) or not culprits):
        # The branch alone does not show the change (it came with the merge itself, e.g.
        # a conflict with the mainline), or its bisection could not say where: the merge,
        # which a confirmed bisection found, is the answer.
        outer, branch = found[-1]
        return _record_culprit(store, regression, outer, repo, [branch.merge], {}, notify, via="".join(steps[:-1]),
                               after=_why_the_merge(branch, record, culprits))
    if record.status in NAMED and culprits:
        regression = _record_culprit(store, regression, record, repo, culprits, result.get("untestable") or {},
                                     notify, via="".join(steps))
    else:
        notify(f"regression {regression.id}: bisection {record.id} ended {record.status}; left confirmed")
    return regression


def _why_the_merge(branch: MergedBranch, inner: BisectionRecord, culprits: list[str]) -> str:
    """Why a merge is the answer although its branch was bisected (`inner`)."""
    where = f"{branch.fork[:12]}..{branch.tip[:12]}"
    if inner.status == BisectionStatus.NO_CHANGE:
        return f"; its branch {where} alone shows no change (bisection {inner.id}): the change came with the merge"
    guess = f" (best guess {culprits[0][:12]})" if len(culprits) == 1 else ""
    return f"; into its branch {where}, bisection {inner.id} ended {inner.status}{guess}: the merge is the answer"


def _carry_out(store: Store, spec: TrackerSpec, regression: Regression, record: BisectionRecord, budget: Budget,
               progress: Progress, notify: Notify, pace_tolerance: float | None, queue: FleetQueue | None,
               boot_steps: BootSteps) -> BisectionRecord | None:
    """The bisection run on from where it is, within the budget: the record as it is
    then (ended, failed, or paused by the budget), or None when it stopped for now (told
    why: a machine that stays slow)."""
    if record.status != BisectionStatus.RUNNING:
        return record
    if budget.left() == 0:
        return None
    if queue is not None:
        from perfline.track import on_fleet

        return on_fleet.bisect(spec, record, budget.left(), pace_tolerance, store, queue, notify)
    try:
        session.run(store, record, progress, notify, pace_tolerance, allowed=lambda: budget.left() > 0,
                    boot_steps=boot_steps)
    except BisectionFailed as exc:
        notify(f"regression {regression.id}: {exc}")
        # Failed for good (an endpoint does not build): an answer too, to the caller.
        return exc.record if exc.record.status == BisectionStatus.FAILED else None
    return store.bisection(record.id)


def _bisection_into(store: Store, spec: TrackerSpec, regression: Regression, outer: BisectionRecord,
                    branch: MergedBranch, budget: Budget, notify: Notify) -> BisectionRecord | None:
    """The bisection of the branch a merge culprit brought in: found again (a later
    pass), or started now if the budget allows; None when it does not."""
    assert outer.spec.job is not None  # a tracker's bisections run its job
    record = store.bisection_of_range(outer.spec.repo, branch.fork, branch.tip, outer.spec.job, outer.spec.metric,
                                      outer.id)
    if record is None:
        if budget.left() == 0:
            return None
        notify(f"regression {regression.id}: bisection {outer.id} found merge {branch.merge[:12]}: bisecting the "
               f"branch it brought in, {branch.fork[:12]}..{branch.tip[:12]}")
        record = session.start(store, _request(spec, Path(outer.spec.repo), branch.fork, branch.tip,
                                               Path(outer.spec.job), outer.spec.metric, outer.spec.direction), notify)
    if (label := f"bisect-{record.id}") not in budget.labels:
        budget.labels.append(label)  # its runs count against the day's budget, on every pass
    return record


# Bisection outcomes that name commits: the culprit or the range, or the best guess.
NAMED = (BisectionStatus.FOUND, BisectionStatus.RANGE, BisectionStatus.UNCONFIRMED, BisectionStatus.BUDGET)


def _record_culprit(store: Store, regression: Regression, record: BisectionRecord, repo: Path, culprits: list[str],
                    untestable: dict[str, str], notify: Notify, via: str = "", after: str = "") -> Regression:
    """The bisection's answer on the record: one culprit, or the range of commits the
    change may be in when a commit next to it could not be tested (never one of them
    picked: git bisect's "the first bad commit could be any of"). `via`: the merges the
    answer was followed into; `after`: why the answer is a merge."""
    commits = [commit_info(repo, sha) for sha in culprits]
    if len(commits) == 1:
        [commit] = commits
        regression = store.set_regression_narrowing(regression.id, culprit=commit.sha, culprit_subject=commit.subject)
        note = f"{via}bisection {record.id}: {record.status}, culprit {commit.sha[:12]} {commit.subject}{after}"
    else:
        suspects = [Suspect(c.sha, c.subject, untestable.get(c.sha, "measured bad")) for c in commits]
        regression = store.set_regression_narrowing(regression.id, culprits=suspects)
        note = (f"{via}bisection {record.id}: {record.status}, the first bad commit could be any of: "
                + "; ".join(f"{s.sha[:12]} {s.subject} ({s.why})" for s in suspects))
    # A bisection out of runs names its best guess, which is not a finding.
    status = RegressionStatus.BUDGET if record.status == BisectionStatus.BUDGET else RegressionStatus.BISECTED
    regression = transition(store, regression.id, status, note)
    notify(f"regression {regression.id}: {note}")
    return regression


def _bisection_of(store: Store, spec: TrackerSpec, regression: Regression, repo: Path, budget: Budget,
                  notify: Notify) -> BisectionRecord | None:
    """The record's bisection, started now if it has none yet, or if the one it had ran
    out of runs and the record was marked confirmed again (a second try)."""
    if regression.bisection_id is not None:
        record = store.bisection(regression.bisection_id)
        if record.status != BisectionStatus.BUDGET:
            return record
    if budget.left() == 0:
        return None
    assert regression.good is not None and regression.bad is not None
    job = _job_file(spec, regression)
    if job is None:
        notify(f"regression {regression.id}: its job has several cases; bisect it by hand with a one-case job")
        return None
    request = _request(spec, repo, regression.good, regression.bad, job, regression.metric,
                       _direction(store, regression))
    record = session.start(store, request, notify)
    store.set_regression_narrowing(regression.id, bisection_id=record.id)
    budget.labels.append(f"bisect-{record.id}")
    return record


def _request(spec: TrackerSpec, repo: Path, good: str, bad: str, job: Path, metric: str,
             direction: str) -> StartRequest:
    """A bisection of the tracker's job over good..bad, built as the tracker builds."""
    booted = spec.kernel_config is not None
    return StartRequest(
        good=good, bad=bad, repo=None if booted else repo, build=None if booted else spec.build,
        kernel_tree=repo if booted else None, config=spec.kernel_config, job=job, metric=metric,
        direction=direction, max_runs=BISECT_MAX_RUNS, on_lab=booted and spec.fleet_class is not None,
    )


def _job_file(spec: TrackerSpec, regression: Regression) -> Path | None:
    """The job of the regression's case as a file of one case (a bisection loads its job
    from a file); an inline job is written under perfline's cache."""
    for job in spec.jobs:
        found = expand(job.spec)
        if not any((c.benchmark, c.key) == (regression.benchmark, regression.case_key) for c in found):
            continue
        if len(found) != 1:
            return None
        return job.file or _write_inline(spec, job)
    return None


def _write_inline(spec: TrackerSpec, job: TrackedJob) -> Path:
    assert job.text is not None
    path = cache_dir() / "track" / spec.name / f"{job.spec.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f"# written by `perfline track` from {spec.path}, for the bisections of its regressions\n{job.text}"
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def _direction(store: Store, regression: Regression) -> str:
    for sample in store.get_run(regression.after_run_id).samples:
        if sample.metric.name == regression.metric:
            return sample.metric.direction.value
    raise CannotConfirm(f"run {regression.after_run_id} has no {regression.metric}")


