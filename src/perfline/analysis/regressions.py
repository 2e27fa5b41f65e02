"""Regression records: change points judged by direction, and their life cycle."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfline.analysis.comparison import CaseComparison, Side, compare_sides
from perfline.analysis.series import Series, judge
from perfline.records.fingerprint import Fingerprint
from perfline.records.job import ACCELS, Case, VmSpec
from perfline.records.status import RegressionStatus, RunStatus
from perfline.targets.kernels import KernelError, get_kernel

if TYPE_CHECKING:
    from perfline.runner import RunContext
    from perfline.stats.changepoint import ChangePoint
    from perfline.store import Regression, RunDetail, Store

STATUSES = tuple(RegressionStatus)
# Who may follow whom: a confirmed change gets bisected and later fixed; a false alarm
# or a fix can be reopened when the change turns out real after all.
TRANSITIONS = {
    RegressionStatus.NEW: {RegressionStatus.CONFIRMED, RegressionStatus.FALSE_ALARM, RegressionStatus.FIXED},
    RegressionStatus.CONFIRMED: {RegressionStatus.BISECTED, RegressionStatus.BUDGET, RegressionStatus.FIXED,
                                 RegressionStatus.FALSE_ALARM},
    RegressionStatus.BISECTED: {RegressionStatus.FIXED},
    RegressionStatus.BUDGET: {RegressionStatus.CONFIRMED, RegressionStatus.BISECTED, RegressionStatus.FIXED},
    RegressionStatus.FALSE_ALARM: {RegressionStatus.NEW},
    RegressionStatus.FIXED: {RegressionStatus.NEW},
}


def why_label(regression_id: int) -> str:
    """The label of the profiled A/B of a regression's culprit against its parent (a
    tracker runs it after the bisection; the report reads it)."""
    return f"why-{regression_id}"


def rerun_label(regression_id: int) -> str:
    """The label of a regression's confirmation over kexec boots (a kexec tracker's: its
    runs are the blocks of an ab, kept apart from the tracker's tested commits)."""
    return f"confirm-{regression_id}"


# The run setting that says which record a tracker's confirmation run is of
# (analysis.sequential_confirmation; set aside when the record is reopened).
CONFIRMS = "confirms"


class TransitionError(ValueError):
    pass


# A change point that moved by up to this many points as data arrived is the same
# change (TCPDBench's margin, docs/statistics.md).
MARGIN = 5


def record(
    store: Store, series: Series, change: ChangePoint, claimed: Collection[int] = (), *,
    tracker: str | None = None, good: str | None = None, bad: str | None = None,
) -> tuple[Regression, bool]:
    """Store the change point as a regression/improvement record unless it is known.

    Known is: a record of this series whose first run after the change is this one, or
    one of the same kind whose first run after its change is a run of a point within
    MARGIN points of this one; the nearest not in `claimed` (records other change points
    of this detection took). A known record still `new` takes the new estimate and
    runs; any other is left as it is.
    """
    from perfline.store import Regression  # SQLAlchemy: only when recording, not at start-up

    before = series.points[change.index - 1].runs[-1]
    after = series.points[change.index].runs[0]
    near = []
    for distance in range(MARGIN + 1):
        for index in sorted({change.index - distance, change.index + distance}):
            if 0 <= index < len(series.points):
                near += [run.id for run in series.points[index].runs]
    return store.record_regression(
        Regression(
            id=0,
            metric=series.metric.name,
            benchmark=series.benchmark,
            case_key=series.case_key,
            machine_id=series.machine_id,
            before_run_id=before.id,
            after_run_id=after.id,
            kind=judge(series.metric, change.change_pct),
            change_pct=change.change_pct,
            ci_pct=change.ci_pct,
            strength=change.strength,
            status=RegressionStatus.NEW,
            note=None,
            detected_at=after.started_at,
            updated_at=after.started_at,
            tracker=tracker,
            good=good,
            bad=bad,
        ),
        near=near,
        claimed=claimed,
    )


def transition(store: Store, regression_id: int, status: str, note: str | None = None) -> Regression:
    current = store.get_regression(regression_id)
    if status not in STATUSES:
        raise TransitionError(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
    if status not in TRANSITIONS[RegressionStatus(current.status)]:
        allowed = ", ".join(sorted(TRANSITIONS[RegressionStatus(current.status)]))
        raise TransitionError(
            f"regression {regression_id} is {current.status}; it can become {allowed}, not {status}"
        )
    if status == RegressionStatus.NEW and current.status != RegressionStatus.NEW:
        # Reopened (by hand: nothing else sets `new`): a tracker's confirmation is run
        # afresh, not judged again from the pairs (or, over kexec boots, the ab) that
        # ended the record before.
        store.set_aside_kexec_series("ab", "regression", regression_id)
        store.set_aside_runs(CONFIRMS, regression_id)
    return store.set_regression_status(regression_id, status, note)


class CannotConfirm(RuntimeError):
    """The target cannot produce both sides again (e.g. they ran different kernels)."""


def check_confirmable(regression: Regression) -> None:
    """Before anything runs: a confirmation ends in confirmed or false-alarm, so both
    must be allowed from the record's status (only `new`)."""
    allowed = TRANSITIONS[RegressionStatus(regression.status)]
    if not {RegressionStatus.CONFIRMED, RegressionStatus.FALSE_ALARM} <= allowed:
        reopen = (f"; `perfline regressions mark {regression.id} new` reopens it"
                  if RegressionStatus.NEW in allowed else "")
        raise TransitionError(
            f"regression {regression.id} is {regression.status}: only a new one can be confirmed{reopen}"
        )


# Knobs a side's fingerprint shows that cannot be set back: lockdown only goes up.
_NOT_SETTABLE = frozenset({"/sys/kernel/security/lockdown"})


@dataclass(frozen=True)
class Reproduction:
    """The two sides as they run again, and what was set to make them so."""

    before: Case
    after: Case
    # Per side: sysctl/sysfs values that differed between the sides' fingerprints and
    # are applied as that side's tunables.
    knobs: tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]

    def describe(self) -> str:
        """What the note says besides the result: the kernels booted, the knobs set."""
        said = []
        if self.before.vm is not None and self.after.vm is not None:
            said.append(f"in VMs with kernels {self.before.vm.kernel} and {self.after.vm.kernel}")
        if any(self.knobs):
            sides = [", ".join(f"{kind} {key}={value}" for kind, values in knobs.items()
                               for key, value in values.items()) or "-" for knobs in self.knobs]
            said.append(f"with the knobs the sides' runs differed in: before {sides[0]}; after {sides[1]}")
        return "; ".join(said)


def reproduction(store: Store, regression: Regression, pairs: int, here: Fingerprint) -> Reproduction:
    """The cases of the runs on both sides of the change, to run again on this host.

    What perfline can set again is reproduced: benchmark parameters and tunables; the
    sysctl and sysfs values that differ between the two runs' fingerprints (changed
    outside perfline), each side's own; and for runs in a VM (target qemu) the
    registered kernel each side booted. Another machine, another kernel on this host,
    or two commits of a build (the same setup here twice) cannot be recreated: those
    raise CannotConfirm. Nothing is run.
    """
    check_confirmable(regression)
    sides = [store.get_run(run_id) for run_id in (regression.before_run_id, regression.after_run_id)]
    for detail in sides:
        fingerprint = detail.fingerprint
        if fingerprint["machine_id"] != here.machine_id:
            raise CannotConfirm(
                f"run {detail.info.id} ran on {fingerprint['hostname']}; confirm it there"
            )
    vms = [_vm(detail) for detail in sides]
    commits = [detail.info.kernel_commit for detail in sides]
    # Two VM kernels carry the commits (a kernel tree's builds): booting each reproduces them.
    own_kernels = vms[0] is not None and vms[1] is not None and vms[0].kernel != vms[1].kernel
    if commits[0] and commits[1] and not _same_commit(commits[0], commits[1]) and not own_kernels:
        raise CannotConfirm(
            f"runs {sides[0].info.id} and {sides[1].info.id} were measured at commits {commits[0]} and "
            f"{commits[1]}; a re-run here would measure one setup twice. Bisect them instead: "
            f"perfline bisect start --good {commits[0]} --bad {commits[1]} --repo REPO --build CMD "
            f"--job JOB --metric {regression.metric}"
        )
    for detail, vm in zip(sides, vms, strict=True):
        fingerprint = detail.fingerprint
        if vm is None and fingerprint["kernel_release"] != here.kernel_release:
            raise CannotConfirm(
                f"run {detail.info.id} ran kernel {fingerprint['kernel_release']}, this host runs "
                f"{here.kernel_release}; boot that kernel (or use a VM target) to confirm"
            )
    knobs = _outside_knobs(sides) if not any(vms) else ({}, {})
    before, after = (_case(detail, pairs, vm, extra)
                     for detail, vm, extra in zip(sides, vms, knobs, strict=True))
    return Reproduction(before, after, knobs)


def _same_commit(a: str, b: str) -> bool:
    # Without the repository an abbreviated sha is only known to be its full one's prefix.
    return a.startswith(b) or b.startswith(a)


def _vm(detail: RunDetail) -> VmSpec | None:
    """The VM a qemu run booted, with the same registered kernel, size and accelerator."""
    if detail.info.target != "qemu":
        return None
    settings = detail.settings
    name = settings.get("vm_kernel")
    if not name:
        raise CannotConfirm(f"run {detail.info.id} stored no VM kernel (its VM never booted)")
    try:
        kernel = get_kernel(str(name))
    except KernelError:
        raise CannotConfirm(
            f"run {detail.info.id} booted kernel {name}, which is no longer registered "
            "(see `perfline kernels list`); register it again under that name to confirm"
        ) from None
    release = settings.get("vm_kernel_release")
    if release and kernel.release != release:
        raise CannotConfirm(
            f"run {detail.info.id} booted kernel {name} at release {release}; it is now {kernel.release}"
        )
    defaults = VmSpec(str(name))
    accel = settings.get("vm_accel")
    return VmSpec(
        kernel=str(name),
        cpus=int(settings.get("vm_cpus", defaults.cpus)),
        memory_mb=int(settings.get("vm_memory_mb", defaults.memory_mb)),
        # The accelerator it ran with: a side that fell back to TCG is re-run under TCG.
        accel=accel if accel in ACCELS else defaults.accel,
    )


def _outside_knobs(sides: list[RunDetail]) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """Per side, the sysctl and sysfs values in which the two runs' fingerprints differ,
    other than the ones the case sets itself: knobs changed outside perfline."""
    found: tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]] = ({}, {})
    for kind, field in (("sysctl", "sysctls"), ("sysfs", "sysfs")):
        before, after = (detail.fingerprint.get(field) or {} for detail in sides)
        own = set(sides[0].tunables.get(kind, {})) | set(sides[1].tunables.get(kind, {}))
        for key in sorted((before.keys() & after.keys()) - own - _NOT_SETTABLE):
            values = (_selected(before[key]), _selected(after[key]))
            if values[0] != values[1]:
                for side, value in zip(found, values, strict=True):
                    side.setdefault(kind, {})[key] = value
    return found


def _selected(value: str) -> str:
    """A selection file's value as written: `always [madvise] never` is `madvise`."""
    match = re.search(r"\[([^\]]+)\]", value)
    return match.group(1) if match else value.strip()


def _case(detail: RunDetail, pairs: int, vm: VmSpec | None = None,
          knobs: dict[str, dict[str, str]] | None = None) -> Case:
    tunables: dict[str, dict[str, Any]] = {kind: dict(values) for kind, values in detail.tunables.items()}
    for kind, values in (knobs or {}).items():
        tunables.setdefault(kind, {}).update(values)
    return Case(
        job=detail.info.job,
        benchmark=detail.info.benchmark,
        params=dict(detail.params),
        tunables=tunables,
        repeat=pairs,
        warmup=1,
        monitors=(),
        target=detail.info.target,
        vm=vm,
    )


def confirm(store: Store, regression: Regression, found: Reproduction, ctx: RunContext, pairs: int
            ) -> tuple[Regression, CaseComparison]:
    """Re-run both sides as `reproduction` found them, `pairs` pairs interleaved, judged
    at the usual alpha (`perfline regressions confirm`): confirmed when the change shows
    again, with the same sign and significance, a false alarm when it does not; an
    inconclusive re-run raises CannotConfirm (the record stays new). A tracker's
    confirmation is sequential and goes on over attempts (analysis.sequential_confirmation)."""
    # Not above: the runner is slow to import, and `perfline history` and `detect`,
    # which import this module, run nothing.
    from perfline.runner import execute_interleaved

    outcomes = execute_interleaved(found.before, found.after, pairs, ctx)
    if len(outcomes) < 2 or any(o.repetitions < 2 for o in outcomes):
        raise CannotConfirm("the re-runs failed: " + "; ".join(f"run {o.run_id}: {o.error}" for o in outcomes))
    sides = [Side(f"{name} (run {o.run_id})", [store.get_run(o.run_id)])
             for name, o in zip(("before", "after"), outcomes, strict=True)]
    comparison = compare_sides(sides, store, paired=True)
    # A re-run a failed repetition cut short has not had its pairs: undecided, it says
    # so rather than that the change is not there.
    cut_short = [o for o in outcomes if o.status != RunStatus.COMPLETED]
    retry = None if not cut_short else (
        f"the re-run stopped after {min(o.repetitions for o in outcomes)} pairs (run {cut_short[0].run_id}: "
        f"{cut_short[0].error}); confirm it again")
    judged = judge_rerun(store, regression, comparison, ReRun(
        f"re-run interleaved (runs {outcomes[0].run_id}, {outcomes[1].run_id})",
        f"the re-run (runs {outcomes[0].run_id}, {outcomes[1].run_id})", f"{outcomes[0].repetitions} pairs",
        "; confirm again with more --pairs", retry), False, found.describe())
    return judged, comparison


@dataclass(frozen=True)
class ReRun:
    """How a re-run of a change is named in the record's note and in its messages."""

    what: str  # the note's start: "re-run interleaved (runs 4, 5)"
    subject: str  # "the re-run (runs 4, 5)", in "... is inconclusive"
    length: str  # "20 pairs", in "inconclusive after ..."
    again: str  # how to try an inconclusive one again, appended to the message
    retry: str | None = None  # an inconclusive re-run is tried again, for this reason


def judge_rerun(store: Store, regression: Regression, comparison: CaseComparison, rerun: ReRun,
                end_undecided: bool, how: str | None = None) -> Regression:
    """A re-run's comparison judged into the record: `confirmed` when the change shows
    again with the same sign, `false-alarm` when it does not; an inconclusive one raises
    CannotConfirm (the record stays new), or with `end_undecided` ends `false-alarm`, its
    note saying "not confirmed"."""
    [row] = [r for r in comparison.rows if r.metric.name == regression.metric]
    again = row.others[0]
    if again is None:
        raise CannotConfirm(f"the re-run after the change has no {regression.metric} samples")
    from perfline.stats.two_sample import INCONCLUSIVE  # scipy: only when confirming

    same_way = again.significant and (again.change_pct > 0) == (regression.change_pct > 0)
    undecided = not same_way and again.verdict == INCONCLUSIVE
    if undecided and rerun.retry:
        raise CannotConfirm(rerun.retry)
    if undecided and not end_undecided:
        # Neither the change nor its absence shown: not evidence of a false alarm.
        more = f"; about {again.more_samples} more pairs would decide it" if again.more_samples else ""
        raise CannotConfirm(
            f"{rerun.subject} is inconclusive: "
            f"{again.change_pct:+.1f}% [{again.ci_pct[0]:+.1f}, {again.ci_pct[1]:+.1f}]{more}{rerun.again}"
        )
    status = RegressionStatus.CONFIRMED if same_way else RegressionStatus.FALSE_ALARM
    note = (f"{rerun.what}: "
            f"{again.change_pct:+.1f}% [{again.ci_pct[0]:+.1f}, {again.ci_pct[1]:+.1f}], p={again.p_value:.2g}")
    if undecided:
        note = (f"not confirmed: {note}, inconclusive after {rerun.length}; "
                f"`perfline regressions mark {regression.id} new` tries again")
    if how:
        note += f"; {how}"
    return transition(store, regression.id, status, note)
