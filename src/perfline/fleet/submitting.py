"""Cases into the fleet's queue, and waiting for what they became."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from perfline.fleet.queue import FINISHED, FleetQueue, class_queue, machine_queue
from perfline.records.errors import UserError
from perfline.records.job import Case, case_to_json
from perfline.store import Store


@dataclass(frozen=True)
class Placement:
    """Where jobs go: one class's queue, one machine's, or each machine of a class."""

    machine_class: str | None = None
    machine: str | None = None
    each_machine: bool = False


@dataclass(frozen=True)
class Submitted:
    job_id: int
    case: Case
    queue: str


def queues_for(store: Store, placement: Placement) -> list[str]:
    if placement.machine is not None:
        store.fleet_machine(placement.machine)  # a name nobody registered is an error now, not a lost job
        return [machine_queue(placement.machine)]
    machines = store.fleet_machines()
    classes = sorted({m.facts.machine_class for m in machines})
    machine_class = placement.machine_class
    if machine_class is None:
        if len(classes) != 1:
            raise UserError(f"name the machines' class with --class (classes: {', '.join(classes) or 'none yet'})")
        machine_class = classes[0]
    if placement.each_machine:
        names = [m.facts.name for m in machines if m.facts.machine_class == machine_class and m.hold is None]
        if not names:
            raise UserError(f"--each-machine: no machine of class {machine_class} takes jobs")
        return [machine_queue(name) for name in names]
    return [class_queue(machine_class)]


def submit(queue: FleetQueue, store: Store, cases: list[Case], placement: Placement, *, label: str | None,
           kernel_commit: str | None, priority: int = 0) -> list[Submitted]:
    """One job per case (per case and machine with `each_machine`), in the cases' order."""
    submitted: list[Submitted] = []
    for target in queues_for(store, placement):
        args = [{"case": case_to_json(case), "label": label, "kernel_commit": kernel_commit} for case in cases]
        ids = queue.submit(target, args, priority)
        submitted += [Submitted(job_id, case, target) for job_id, case in zip(ids, cases, strict=True)]
    return submitted


def wait(queue: FleetQueue, job_ids: list[int], poll_s: float = 1.0,
         progress: Callable[[int, int], None] | None = None) -> dict[int, str]:
    """Until every job has ended; their final states by id."""
    wanted = set(job_ids)
    while True:
        states = {job.id: job.status for job in queue.jobs() if job.id in wanted}
        done = sum(1 for state in states.values() if state in FINISHED)
        if progress is not None:
            progress(done, len(job_ids))
        if done == len(job_ids):
            return states
        time.sleep(poll_s)
