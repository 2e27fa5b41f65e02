"""Jobs of machines that died: taken back and queued again for another machine.

A worker that is SIGKILLed or loses power stops heartbeating. After the stalled
timeout, whoever looks first (any live worker between jobs, `fleet status`) takes its
job back: in one store transaction the dead attempt becomes `stale` and its run
`interrupted` (so a late finish cannot complete it), then the job goes back to its
queue, where the next free machine of the class takes it. An attempt whose run had
completed before its machine fell silent is the job's success, not a reason to run it
again.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfline.fleet.queue import STALLED_LOCK, FleetQueue
from perfline.store import Store
from perfline.system.env_settings import env_number


def stalled_timeout() -> float:
    """$PERFLINE_FLEET_STALLED_S (default 120 s), read when a command needs it: a bad value
    is then that command's one error line, not a traceback at import."""
    return env_number("PERFLINE_FLEET_STALLED_S", 120.0)


@dataclass(frozen=True)
class TakenBack:
    job_id: int
    requeued: bool  # False: its run had completed, so the job is done
    interrupted_runs: list[int]
    # Its machine went to boot the job's kernel and never came back: ended boot-failed.
    boot_failed: bool = False


def take_back_stalled(store: Store, queue: FleetQueue, stalled_s: float) -> list[TakenBack]:
    """One look; skipped when another machine is looking (its look covers the same jobs,
    and two looks at once could queue a job again after a new machine took it)."""
    with queue.exclusively(STALLED_LOCK) as mine:
        return _take_back(store, queue, stalled_s) if mine else []


def _take_back(store: Store, queue: FleetQueue, stalled_s: float) -> list[TakenBack]:
    from perfline.fleet import kernel_jobs

    taken: list[TakenBack] = []
    for job in queue.stalled(stalled_s):
        # A machine booting the job's kernel is silent, not dead: left to come back,
        # unless it has been away too long (then the kernel's job ends boot-failed).
        boot = store.booting_attempt(job.id)
        if boot is not None:
            if kernel_jobs.overdue(boot) and kernel_jobs.end_overdue(store, queue, job.id, boot):
                taken.append(TakenBack(job.id, False, [], boot_failed=True))
            continue
        reason = f"its machine stopped answering (no heartbeat for {stalled_s:g} s); job {job.id} queued again"
        found = store.take_back(job.id, reason, stalled_s)
        if found is not None:
            taken.append(TakenBack(job.id, found.completed_run is None, found.interrupted_runs))
    queue.prune_workers(stalled_s)
    return taken
