"""A tracker's work on the fleet (`fleet: {class: CLASS}` in its file): each pending
commit's cases, a regression's confirmation and its bisection, as jobs for the machines
of the class, waited for. What they find is in the store, as when the tracker runs them
itself: the runs (labelled with the tracker's name, at their commit), the regression's
status, the bisection's samples.

A confirmation and a bisection each run whole on one machine of the class, so both sides
of an interleaved pair, and every probe of a bisection, are measured on the same machine.
A kernel tracker's commits are kernel jobs (fleet.kernel_jobs): the machine boots each
commit's kernel; one that does not boot leaves its commit untestable. Its confirmation
and bisection are jobs one machine of the class carries over its boots
(fleet.kernel_narrowing), as the one-machine kexec tracker does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfline import git
from perfline.fleet import kernel_jobs, kernel_narrowing, submitting
from perfline.fleet.kernel_jobs import BOOT_FAILED
from perfline.fleet.queue import FleetQueue, class_queue
from perfline.records.job import Case, case_to_json
from perfline.store import Regression, Store
from perfline.store.bisections import BisectionRecord
from perfline.track.budget import Budget
from perfline.track.machines import Measuring
from perfline.track.testing import Tested, cases
from perfline.track.tracker_file import TrackerSpec

Notify = Callable[[str], None]


def open_queue(store: Store) -> FleetQueue:
    return FleetQueue(store.engine.url.render_as_string(hide_password=False))


def test_commits(spec: TrackerSpec, commits: list[git.Commit], store: Store, queue: FleetQueue, where: Measuring,
                 budget: Budget, notify: Notify) -> list[Tested]:
    """Queue every missing case of every commit (as far as the budget goes), wait for
    all of them: the class's machines test the commits side by side."""
    assert spec.fleet_class is not None
    done = store.completed_cases(spec.name, where.machine_ids)
    config = None if spec.kernel_config is None else _config(spec)
    left = budget.left()
    queued: dict[str, list[int]] = {}
    for commit in commits:
        missing = [c for c in cases(spec) if (c.benchmark, c.key) not in done.get(commit.sha, set())][:left]
        if not missing:
            continue
        left -= len(missing)
        queued[commit.sha] = _submit(queue, spec, [_case_job(spec, case, commit.sha, config) for case in missing])
    ids = [i for jobs in queued.values() for i in jobs]
    states: dict[int, str] = {}
    if ids:
        notify(f"{len(ids)} job(s) queued for class {spec.fleet_class}: {len(queued)} commit(s)")
        states = _wait(queue, ids, notify)
    tested = []
    for commit in commits:
        if commit.sha not in queued:
            continue
        failed = [i for i in queued[commit.sha] if states[i] != "succeeded"]
        problem = None
        if failed:
            errors = [a.error for a in store.attempts(failed) if a.error]
            problem = f"job {failed[0]} {states[failed[0]]}" + (f": {errors[-1]}" if errors else "")
            if errors and errors[-1].startswith(BOOT_FAILED):
                problem = f"untestable: its kernel did not boot (job {failed[0]}: {errors[-1]})"
            notify(f"{commit.sha[:12]}: {problem}")
        tested.append(Tested(commit, len(queued[commit.sha]), not failed, problem))
    return tested


def confirm(spec: TrackerSpec, regression: Regression, case: Case, pairs: int, plan_pairs: int, store: Store,
            queue: FleetQueue, notify: Notify) -> Regression:
    if spec.kernel_config is not None:
        notify(f"regression {regression.id}: confirming {str(regression.good)[:12]} against "
               f"{str(regression.bad)[:12]} over kexec boots of a machine of class {spec.fleet_class}")
        _run_one(queue, spec, kernel_narrowing.confirm_args(regression, case, spec.name, spec.repo,
                                                            _config(spec), spec.floor_pct), store, notify)
        return store.get_regression(regression.id)
    notify(f"regression {regression.id}: confirming {str(regression.good)[:12]} against {str(regression.bad)[:12]} "
           f"interleaved on a machine of class {spec.fleet_class}, up to {pairs} pairs")
    _run_one(queue, spec, {"kind": "confirm", "regression": regression.id, "case": case_to_json(case),
                           "good": regression.good, "bad": regression.bad, "pairs": pairs, "label": spec.name,
                           "plan_pairs": plan_pairs,
                           "tree": {"repo": spec.repo, "build": spec.build}}, store, notify)
    return store.get_regression(regression.id)


def bisect(spec: TrackerSpec, record: BisectionRecord, allowed_runs: int, pace_tolerance: float | None,
           store: Store, queue: FleetQueue, notify: Notify) -> BisectionRecord:
    notify(f"bisection {record.id}: on a machine of class {spec.fleet_class}, at most {allowed_runs} runs today")
    args = ({"kind": "bisect", "bisection": record.id, "allowed_runs": allowed_runs, "repo": spec.repo,
             "pace_tolerance": pace_tolerance} if spec.kernel_config is None
            else kernel_narrowing.bisect_args(store, record, allowed_runs, spec.repo, _config(spec)))
    _run_one(queue, spec, args, store, notify)
    return store.bisection(record.id)


def _config(spec: TrackerSpec) -> str:
    """A kernel tracker's config, as text: the jobs carry it to machines that cannot
    reach the tracker's files."""
    assert spec.kernel_config is not None
    return spec.kernel_config.read_text(errors="replace")


def _case_job(spec: TrackerSpec, case: Case, sha: str, config: str | None) -> dict[str, Any]:
    if config is not None:  # a kernel tracker: the machine boots the commit's kernel
        return kernel_jobs.job_args(case, spec.name, sha, spec.repo, config)
    return {"case": case_to_json(case), "label": spec.name, "kernel_commit": sha,
            "tree": {"repo": spec.repo, "commit": sha, "build": spec.build}}


def _submit(queue: FleetQueue, spec: TrackerSpec, args: list[dict[str, Any]]) -> list[int]:
    assert spec.fleet_class is not None
    return queue.submit(class_queue(spec.fleet_class), args)


def _run_one(queue: FleetQueue, spec: TrackerSpec, args: dict[str, Any], store: Store, notify: Notify) -> None:
    [job] = _submit(queue, spec, [args])
    state = _wait(queue, [job], notify)[job]
    if state != "succeeded":
        errors = [a.error for a in store.attempts([job]) if a.error]
        notify(f"job {job} {state}" + (f": {errors[-1]}" if errors else ""))


def _wait(queue: FleetQueue, ids: list[int], notify: Notify) -> dict[int, str]:
    said = {"done": -1}

    def progress(done: int, total: int) -> None:
        if done != said["done"]:
            said["done"] = done
            notify(f"fleet: {done}/{total} job(s) done")

    return submitting.wait(queue, ids, progress=progress)
