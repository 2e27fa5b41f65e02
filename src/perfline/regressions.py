"""Regression records: change points judged by direction, and their life cycle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfline.comparison import CaseComparison, Side, compare_sides
from perfline.fingerprint import Fingerprint
from perfline.jobs.spec import Case
from perfline.runner import RunContext, execute_interleaved
from perfline.series import Series, judge
from perfline.store import Regression, RunDetail, Store

if TYPE_CHECKING:
    from perfline.stats.changepoint import ChangePoint

NEW, CONFIRMED, FALSE_ALARM, BISECTED, FIXED = "new", "confirmed", "false-alarm", "bisected", "fixed"
STATUSES = (NEW, CONFIRMED, FALSE_ALARM, BISECTED, FIXED)
# Who may follow whom: a confirmed change gets bisected and later fixed; a false alarm
# or a fix can be reopened when the change turns out real after all.
TRANSITIONS = {
    NEW: {CONFIRMED, FALSE_ALARM, FIXED},
    CONFIRMED: {BISECTED, FIXED, FALSE_ALARM},
    BISECTED: {FIXED},
    FALSE_ALARM: {NEW},
    FIXED: {NEW},
}


class TransitionError(ValueError):
    pass


def record(store: Store, series: Series, change: ChangePoint) -> tuple[Regression, bool]:
    """Store the change point as a regression/improvement record unless it is known."""
    before = series.points[change.index - 1].runs[-1]
    after = series.points[change.index].runs[0]
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
            status=NEW,
            note=None,
            detected_at=after.started_at,
            updated_at=after.started_at,
        )
    )


def transition(store: Store, regression_id: int, status: str, note: str | None = None) -> Regression:
    current = store.get_regression(regression_id)
    if status not in STATUSES:
        raise TransitionError(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
    if status not in TRANSITIONS[current.status]:
        allowed = ", ".join(sorted(TRANSITIONS[current.status]))
        raise TransitionError(
            f"regression {regression_id} is {current.status}; it can become {allowed}, not {status}"
        )
    return store.set_regression_status(regression_id, status, note)


class CannotConfirm(RuntimeError):
    """The target cannot produce both sides again (e.g. they ran different kernels)."""


def reproduction_cases(store: Store, regression: Regression, pairs: int, here: Fingerprint) -> tuple[Case, Case]:
    """The cases of the runs on both sides of the change, to run again on this host.

    Only what perfline can set again is reproduced: benchmark parameters and tunables.
    Different kernels or another machine cannot be recreated here.
    """
    sides = [store.get_run(run_id) for run_id in (regression.before_run_id, regression.after_run_id)]
    for detail in sides:
        fingerprint = detail.fingerprint
        if fingerprint["machine_id"] != here.machine_id:
            raise CannotConfirm(
                f"run {detail.info.id} ran on {fingerprint['hostname']}; confirm it there"
            )
        if fingerprint["kernel_release"] != here.kernel_release:
            raise CannotConfirm(
                f"run {detail.info.id} ran kernel {fingerprint['kernel_release']}, this host runs "
                f"{here.kernel_release}; boot that kernel (or use a VM target) to confirm"
            )
    before, after = (_case(detail, pairs) for detail in sides)
    return before, after


def _case(detail: RunDetail, pairs: int) -> Case:
    return Case(
        job=detail.info.job,
        benchmark=detail.info.benchmark,
        params=dict(detail.params),
        tunables={kind: dict(values) for kind, values in detail.tunables.items()},
        repeat=pairs,
        warmup=1,
        monitors=(),
        target=detail.info.target,
    )


def confirm(store: Store, regression_id: int, ctx: RunContext, pairs: int) -> tuple[Regression, CaseComparison]:
    """Re-run both sides interleaved; confirmed when the change shows again, with the same
    sign and significance, else a false alarm."""
    regression = store.get_regression(regression_id)
    before, after = reproduction_cases(store, regression, pairs, ctx.fingerprint())
    outcomes = execute_interleaved(before, after, pairs, ctx)
    if len(outcomes) < 2 or any(o.repetitions < 2 for o in outcomes):
        raise CannotConfirm("the re-runs failed: " + "; ".join(f"run {o.run_id}: {o.error}" for o in outcomes))
    sides = [Side(f"{name} (run {o.run_id})", [store.get_run(o.run_id)])
             for name, o in zip(("before", "after"), outcomes, strict=True)]
    comparison = compare_sides(sides, store, paired=True)
    [row] = [r for r in comparison.rows if r.metric.name == regression.metric]
    again = row.others[0]
    if again is None:
        raise CannotConfirm(f"the re-run after the change has no {regression.metric} samples")
    same_way = again.significant and (again.change_pct > 0) == (regression.change_pct > 0)
    status = CONFIRMED if same_way else FALSE_ALARM
    note = (f"re-run interleaved (runs {outcomes[0].run_id}, {outcomes[1].run_id}): "
            f"{again.change_pct:+.1f}% [{again.ci_pct[0]:+.1f}, {again.ci_pct[1]:+.1f}], p={again.p_value:.2g}")
    return transition(store, regression_id, status, note), comparison
