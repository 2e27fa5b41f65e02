"""The fleet at a glance: each machine's state, each job's, counted per class."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from perfline.fleet.queue import FleetQueue, QueuedJob
from perfline.fleet.stalled import take_back_stalled
from perfline.store import Store
from perfline.store.fleet import Attempt, Machine

# procrastinate's job statuses as the fleet names them.
JOB_STATES = {"todo": "queued", "doing": "running", "aborting": "running", "succeeded": "succeeded",
              "failed": "failed", "cancelled": "cancelled", "aborted": "cancelled"}


@dataclass(frozen=True)
class MachineState:
    name: str
    machine_class: str
    state: str  # idle, busy, booting, offline, bad
    hold: str | None  # drain, bad (with hold_reason)
    hold_reason: str | None
    last_seen: datetime
    job: int | None


@dataclass(frozen=True)
class JobState:
    id: int
    state: str  # queued, running, succeeded, failed, cancelled
    queue: str
    priority: int
    machine: str | None
    attempts: int
    run: int | None


@dataclass(frozen=True)
class FleetStatus:
    machines: list[MachineState]
    jobs: list[JobState]

    def per_class(self) -> dict[str, Counter[str]]:
        """Job states counted per queue (`class:…` or `machine:…`); `retried` counts jobs
        that needed more than one attempt."""
        counts: dict[str, Counter[str]] = {}
        for job in self.jobs:
            counter = counts.setdefault(job.queue, Counter())
            counter[job.state] += 1
            if job.attempts > 1:
                counter["retried"] += 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "machines": [{"name": m.name, "class": m.machine_class, "state": m.state, "hold": m.hold,
                          "hold_reason": m.hold_reason, "last_seen": m.last_seen.isoformat(), "job": m.job}
                         for m in self.machines],
            "jobs": [{"id": j.id, "state": j.state, "queue": j.queue, "priority": j.priority, "machine": j.machine,
                      "attempts": j.attempts, "run": j.run} for j in self.jobs],
        }


def fleet_status(store: Store, queue: FleetQueue, stalled_s: float) -> FleetStatus:
    """Jobs of silent machines are taken back first, so what is shown is what will happen."""
    take_back_stalled(store, queue, stalled_s)
    now = datetime.now(UTC)
    booting = store.booting_machines()
    machines = [_machine_state(m, now, stalled_s, m.facts.machine_id in booting) for m in store.fleet_machines()]
    jobs = queue.jobs()
    attempts: dict[int, list[Attempt]] = {}
    for attempt in store.attempts([job.id for job in jobs]):
        attempts.setdefault(attempt.job_id, []).append(attempt)
    return FleetStatus(machines, [_job_state(job, attempts.get(job.id, [])) for job in jobs])


def _machine_state(machine: Machine, now: datetime, stalled_s: float, booting: bool) -> MachineState:
    silent = (now - machine.last_seen).total_seconds() > stalled_s
    if machine.hold == "bad":
        state = "bad"
    elif booting:  # in a kernel job's kexec boot: its worker is down until the resume is done
        state = "booting"
    elif machine.worker_id is None or silent:
        state = "offline"
    elif machine.job_id is not None:
        state = "busy"
    else:
        state = "idle"
    return MachineState(machine.facts.name, machine.facts.machine_class, state, machine.hold, machine.hold_reason,
                        machine.last_seen, machine.job_id if state == "busy" else None)


def _job_state(job: QueuedJob, attempts: list[Attempt]) -> JobState:
    done = [a for a in attempts if a.state == "succeeded"]
    last = done[-1] if done else (attempts[-1] if attempts else None)
    return JobState(job.id, JOB_STATES.get(job.status, job.status), job.queue, job.priority,
                    last.machine if last else None, len(attempts), last.run_id if last else None)


MACHINE_STYLE = {"idle": "green", "busy": "cyan", "booting": "magenta", "offline": "dim", "bad": "red"}


def status_tables(status: FleetStatus) -> list[Table]:
    """Machines; jobs counted per queue; the jobs not yet ended."""
    machines = Table(title="machines", title_justify="left")
    for column in ("machine", "class", "state", "last seen", "job", "hold"):
        machines.add_column(column)
    for m in status.machines:
        hold = f"{m.hold}: {m.hold_reason}" if m.hold and m.hold_reason else (m.hold or "")
        machines.add_row(m.name, m.machine_class, f"[{MACHINE_STYLE[m.state]}]{m.state}[/]",
                         m.last_seen.strftime("%Y-%m-%d %H:%M:%S"), str(m.job or ""), hold)
    counts = Table(title="jobs per queue", title_justify="left")
    states = ("queued", "running", "succeeded", "failed", "cancelled", "retried")
    counts.add_column("queue")
    for name in states:
        counts.add_column(name, justify="right")
    for queue, counter in sorted(status.per_class().items()):
        counts.add_row(queue, *(str(counter.get(name, 0)) for name in states))
    pending = Table(title="jobs not ended", title_justify="left")
    for column in ("job", "state", "queue", "priority", "machine", "attempts"):
        pending.add_column(column)
    for j in status.jobs:
        if j.state in ("queued", "running"):
            pending.add_row(str(j.id), j.state, j.queue, str(j.priority), j.machine or "", str(j.attempts))
    return [machines, counts, pending]
