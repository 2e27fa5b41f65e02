"""A kernel tracker's confirmation and bisection on one lab machine of its class, over its
boots (`kind: kernel-confirm`, `kernel-bisect`).

The code is the one-machine tracker's (track: `target: kexec` with no fleet): the
confirmation is an ab over kexec boots of the two tested commits' kernels, judged into
the record (analysis.kexec_confirm), the bisection boots one probe a boot
(bisect.kexec_probe). Each boot carries the job's attempt (BootSteps.fleet_attempt), so
the stalled sweep knows the machine is booting, and `perfline resume` on the far side
measures the block or the probe and neither ends the job nor boots the next one: back on
its default kernel, the worker starts again, runs its health job there, takes the job up
again (store.attempts_between_boots) and calls this once more, which goes on from the
store: the ab's next block, or the bisection's next probe (its driver replays the stored
samples and finds the boot's run). The job ends when the ab is judged or the bisection
ends (or pauses, its day's runs spent); the tracker, waiting for it, records the result
as the one-machine tracker does.

The kernels, as a kernel job gets them (fleet.kernel_jobs): from the fleet's shared
image directory (the confirmation's two commits are there: their kernel jobs put them
there), else built on the machine with the tracker's config, which the job carries as
text, and put there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfline.fleet import kernel_jobs
from perfline.fleet.kinds import JobResult
from perfline.fleet.trees import local_repo
from perfline.records.job import Case, case_from_json, case_to_json
from perfline.records.status import RegressionStatus, RunStatus
from perfline.runner import kexec_series
from perfline.runner.kexec_resume import BootSteps, MachineBooting
from perfline.store import Regression, Store
from perfline.store.bisections import BisectionRecord
from perfline.store.kexec_boots import KexecSeries
from perfline.targets import local, machine_settings

CONFIRM, BISECT = "kernel-confirm", "kernel-bisect"
KINDS = (CONFIRM, BISECT)
Say = Callable[[str], None]


def confirm_args(regression: Regression, case: Case, label: str, repo: str, config: str,
                 floor_pct: float) -> dict[str, Any]:
    return {"kind": CONFIRM, "regression": regression.id, "case": case_to_json(case), "label": label,
            "floor": floor_pct, "tree": {"repo": repo, "config": config}}


def bisect_args(store: Store, record: BisectionRecord, allowed_runs: int, repo: str, config: str) -> dict[str, Any]:
    """`allowed_runs` new probes from the samples stored now: the job is called again
    after every boot, so it counts from the store, not in memory."""
    return {"kind": BISECT, "bisection": record.id, "allowed_runs": allowed_runs,
            "samples_before": len(store.bisect_samples(record.id)), "repo": repo, "config": config}


def run(store: Store, args: dict[str, Any], say: Say, steps: BootSteps, images: Path | None) -> JobResult:
    """The job's next step: raises MachineBooting at each boot; the result at its end."""
    if args["kind"] == CONFIRM:
        return _confirm(store, args, say, steps, images)
    return _bisect(store, args, say, steps, images)


def _confirm(store: Store, args: dict[str, Any], say: Say, steps: BootSteps, images: Path | None) -> JobResult:
    # scipy and the analysis: only on machines that confirm.
    from perfline.analysis import kexec_confirm
    from perfline.analysis.regressions import CannotConfirm

    regression = store.get_regression(int(args["regression"]))
    if regression.status != RegressionStatus.NEW:
        return JobResult(RunStatus.COMPLETED)  # judged before this machine went down
    assert regression.good is not None and regression.bad is not None
    series = store.kexec_series_for("ab", "regression", regression.id)
    if series is not None and series.state == "open":
        _next_block(store, series, say, steps)
    label, case = str(args["label"]), case_from_json(args["case"])
    good, bad = (kernel_jobs.booted_case(args["tree"], sha, label, case, images, say)
                 for sha in (regression.good, regression.bad))
    try:
        judged = kexec_confirm.confirm(store, label, regression, good, bad, float(args["floor"]), steps)
    except CannotConfirm as exc:
        return JobResult(RunStatus.FAILED, None, f"cannot confirm: {exc}")
    say(f"regression {judged.id}: {judged.status} ({judged.note})")
    return JobResult(RunStatus.COMPLETED)


def _next_block(store: Store, series: KexecSeries, say: Say, steps: BootSteps) -> None:
    """The ab's next block booted (MachineBooting), as `perfline resume` boots it on one
    machine; after the last one (or a block that did not boot) the series is over."""
    said = kexec_series.go_on(store, store.series_boots(series.id)[-1], machine_settings.load(), steps)
    if said is not None:
        say(said)
    booting = store.open_kexec_boot(local.machine_id(steps.root))
    if booting is not None:
        raise MachineBooting(booting)


def _bisect(store: Store, args: dict[str, Any], say: Say, steps: BootSteps, images: Path | None) -> JobResult:
    from perfline.bisect import kexec_probe, session
    from perfline.builds import kernel

    record = store.bisection(int(args["bisection"]))
    # The tree and the config as this machine has them (the tracker's are paths of its host),
    # the probes' kernels taken from the shared image directory or built and put there.
    config = kernel.keep_config_bytes(str(args["config"]).encode())
    repo = local_repo(str(args["repo"]))
    record = replace(record, spec=replace(record.spec, repo=str(repo), kernel_config=str(config),
                                          build=kernel.build_command(config)))
    builder = kernel_jobs.SharedBuilder(repo, config, images, say)
    before, allowed = int(args["samples_before"]), int(args["allowed_runs"])
    try:
        outcome = session.run(store, record, lambda event, runs, top: None, say, None,
                              lambda: len(store.bisect_samples(record.id)) - before < allowed,
                              boot_steps=steps, on_lab=True, builder=builder)
    except session.BisectionFailed as exc:
        return JobResult(RunStatus.FAILED, None, str(exc))
    finally:
        kexec_probe.close_series(store, record.id)
    say(f"bisection {record.id}: {outcome.record.status}")
    return JobResult(RunStatus.COMPLETED)
