"""The fleet's machines and the attempts at its queued jobs (the queue itself is
procrastinate's tables, reached through perfline.fleet.queue)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from perfline.records.errors import UserError
from perfline.records.status import RunStatus
from perfline.store.engine import Sessions, aware, updated
from perfline.store.schema import FleetAttemptRow, FleetMachineRow, RunRow

# Why a run of a fleet job never ran: its attempt had been taken back when it started.
TAKEN_BACK = "its fleet job was taken back (the machine was silent for too long) before this run began"
# Why a machine takes no jobs; None: it takes them.
HOLDS = ("drain", "bad", "retired")


class MachineNotFound(UserError, LookupError):
    def __init__(self, name: str, known: Iterable[str]) -> None:
        names = ", ".join(sorted(known)) or "none yet: start `perfline worker --machine NAME` on one"
        super().__init__(f"no fleet machine named {name!r} (machines: {names})")


@dataclass(frozen=True)
class MachineFacts:
    """What a worker says of its machine when it registers."""

    name: str
    machine_class: str
    cpu_model: str
    cpus: int
    memory_bytes: int
    kernel: str
    hostname: str
    machine_id: str


@dataclass(frozen=True)
class Machine:
    facts: MachineFacts
    last_seen: datetime
    worker_id: int | None
    job_id: int | None
    hold: str | None
    hold_reason: str | None
    pace_ns: int | None
    health_at: datetime | None
    jobs_since_health: int


@dataclass(frozen=True)
class Attempt:
    id: int
    job_id: int
    machine: str
    run_id: int | None
    state: str
    error: str | None
    started_at: datetime


@dataclass(frozen=True)
class Superseded:
    """What taking a stalled job back from its machine found."""

    interrupted_runs: list[int]  # the dead attempts' runs, now marked interrupted
    completed_run: int | None  # set when the attempt had finished its run after all


class FleetQueries:
    """Mixed into Store; uses its session factory."""

    _session: Sessions

    # -- machines -------------------------------------------------------------------

    def register_machine(self, facts: MachineFacts, worker_id: int) -> Machine:
        """Insert or refresh the machine as served by `worker_id`; its hold stays."""
        now = _now()
        with self._session.begin() as session:
            row = session.get(FleetMachineRow, facts.name)
            if row is None:
                row = FleetMachineRow(name=facts.name, registered_at=now, jobs_since_health=0)
                session.add(row)
            row.machine_class, row.cpu_model, row.cpus = facts.machine_class, facts.cpu_model, facts.cpus
            row.memory_bytes, row.kernel, row.hostname = facts.memory_bytes, facts.kernel, facts.hostname
            row.machine_id = facts.machine_id
            row.last_seen, row.worker_id, row.job_id = now, worker_id, None
            session.flush()
            return _machine(row)

    def machine_seen(self, name: str, worker_id: int) -> None:
        """A heartbeat: the machine is alive, served by this worker."""
        def write(session: Session, _retried: bool) -> None:
            row = self._machine_row(session, name)
            row.last_seen, row.worker_id = _now(), worker_id

        self._session.write(write)

    def machine_left(self, name: str, worker_id: int) -> None:
        """The worker stopped cleanly; unless another worker took the name since."""
        with self._session.begin() as session:
            session.execute(
                update(FleetMachineRow)
                .where(FleetMachineRow.name == name, FleetMachineRow.worker_id == worker_id)
                .values(worker_id=None, job_id=None)
            )

    def machine_job(self, name: str, job_id: int | None) -> None:
        """The job the machine runs now; None when it ended (one more since the health job)."""
        def write(session: Session, _retried: bool) -> None:
            row = self._machine_row(session, name)
            if job_id is None and row.job_id is not None:
                row.jobs_since_health += 1
            row.job_id = job_id

        self._session.write(write)

    def set_hold(self, name: str, hold: str | None, reason: str | None = None) -> Machine:
        assert hold is None or hold in HOLDS
        with self._session.begin() as session:
            row = self._machine_row(session, name)
            row.hold, row.hold_reason = hold, reason
            return _machine(row)

    def record_health(self, name: str, pace_ns: int | None, problem: str | None) -> Machine:
        """A health job's result; a problem marks the machine `bad` with its reason."""
        def write(session: Session, _retried: bool) -> Machine:
            row = self._machine_row(session, name)
            row.health_at, row.jobs_since_health = _now(), 0
            if pace_ns is not None and problem is None:
                row.pace_ns = pace_ns
            if problem is not None:
                row.hold, row.hold_reason = "bad", problem
            return _machine(row)

        return self._session.write(write)

    def class_paces(self, machine_class: str, other_than: str) -> list[int]:
        """The last healthy pace readings of the class's other machines in service."""
        with self._session() as session:
            return [pace for pace in session.scalars(
                select(FleetMachineRow.pace_ns).where(
                    FleetMachineRow.machine_class == machine_class,
                    FleetMachineRow.name != other_than,
                    FleetMachineRow.pace_ns.is_not(None),
                    FleetMachineRow.hold.is_(None),
                )
            ) if pace is not None]

    def class_machine_ids(self, machine_class: str) -> set[str]:
        """The machine ids of the class's machines, retired ones too: their runs stay."""
        with self._session() as session:
            return set(session.scalars(
                select(FleetMachineRow.machine_id).where(FleetMachineRow.machine_class == machine_class)))

    def fleet_machines(self, include_retired: bool = False) -> list[Machine]:
        with self._session() as session:
            query = select(FleetMachineRow).order_by(FleetMachineRow.machine_class, FleetMachineRow.name)
            if not include_retired:
                query = query.where((FleetMachineRow.hold.is_(None)) | (FleetMachineRow.hold != "retired"))
            return [_machine(row) for row in session.scalars(query)]

    def fleet_machine(self, name: str) -> Machine:
        with self._session() as session:
            return _machine(self._machine_row(session, name))

    def _machine_row(self, session: Session, name: str) -> FleetMachineRow:
        row = session.get(FleetMachineRow, name)
        if row is None:
            raise MachineNotFound(name, session.scalars(select(FleetMachineRow.name)).all())
        return row

    # -- attempts -------------------------------------------------------------------

    def start_attempt(self, job_id: int, machine: str, worker_id: int) -> int | None:
        """The attempt of this worker at a job it fetched; None when the job is no longer
        its own (taken back during an outage before the attempt could be stored). The job's
        queue row is locked meanwhile, as `take_back` locks it: one of the two goes first."""
        def write(session: Session, _retried: bool) -> int | None:
            owner = session.execute(text(
                "SELECT status, worker_id FROM procrastinate_jobs WHERE id = :job FOR UPDATE"), {"job": job_id}).first()
            if owner is None or owner.status != "doing" or owner.worker_id != worker_id:
                return None
            row = FleetAttemptRow(job_id=job_id, machine=machine, worker_id=worker_id,
                                  state="running", started_at=_now())
            session.add(row)
            session.flush()
            return row.id

        return self._session.write(write)

    def take_up_attempt(self, attempt_id: int, worker_id: int) -> bool:
        """A running attempt of this machine's, taken up again by its new worker after a
        boot (the worker that started it stopped as the machine went down): the job and
        the attempt are this worker's now, so its heartbeats keep the job from the sweep.
        False when the job is no longer running (ended, cancelled, taken back)."""
        def write(session: Session, _retried: bool) -> bool:
            attempt = session.get(FleetAttemptRow, attempt_id, with_for_update=True)
            if attempt is None or attempt.state != "running":
                return False
            moved = session.execute(text(
                "UPDATE procrastinate_jobs SET worker_id = :worker WHERE id = :job AND status = 'doing'"),
                {"worker": worker_id, "job": attempt.job_id})
            if not getattr(moved, "rowcount", 0):
                return False
            attempt.worker_id = worker_id
            return True

        return self._session.write(write)

    def attach_run(self, session: Session, attempt_id: int, run_id: int) -> bool:
        """In the run's own transaction (Store.start_run): the attempt's run is this one,
        unless the attempt is no longer running (False)."""
        return bool(updated(
            session,
            update(FleetAttemptRow).where(FleetAttemptRow.id == attempt_id, FleetAttemptRow.state == "running")
            .values(run_id=run_id)))

    def end_attempt(self, attempt_id: int, state: str, error: str | None = None) -> bool:
        """End a running attempt; False when it was no longer running (taken back as
        stale), in which case it stays as it is and its job is not this attempt's."""
        def write(session: Session, retried: bool) -> bool:
            # Retried after a lost answer: the first try may have ended it already.
            ended_by_us = retried and session.scalar(
                select(FleetAttemptRow.state).where(FleetAttemptRow.id == attempt_id)) == state
            return ended_by_us or bool(updated(
                session,
                update(FleetAttemptRow)
                .where(FleetAttemptRow.id == attempt_id, FleetAttemptRow.state == "running")
                .values(state=state, error=error, finished_at=_now())
            ))

        return self._session.write(write)

    def take_back(self, job_id: int, reason: str, stalled_s: float) -> Superseded | None:
        """Take a stalled job back from its silent machine, in one transaction with its
        queue row locked: each running attempt whose run is still running becomes `stale`
        and its run `interrupted` (so a late finish cannot complete it: `finish_run` only
        finishes running runs), and the job goes back to its queue; an attempt whose run
        had completed is the job's success after all, and the job is finished. None when
        the job is no longer a stalled one (its machine spoke again, or it ended)."""
        with self._session.begin() as session:
            locked = session.execute(text(
                "SELECT id FROM procrastinate_jobs WHERE id = :job AND status = 'doing' AND (worker_id IS NULL "
                "OR worker_id IN (SELECT id FROM procrastinate_workers "
                "WHERE last_heartbeat < now() - make_interval(secs => :stalled))) FOR UPDATE"),
                {"job": job_id, "stalled": stalled_s}).first()
            if locked is None:
                return None
            found = self._supersede(session, job_id, reason)
            # procrastinate's own functions (schema 3.x), in this transaction.
            if found.completed_run is not None:
                session.execute(text("SELECT procrastinate_finish_job_v1(:job, 'succeeded', false)"), {"job": job_id})
            else:
                session.execute(text("SELECT procrastinate_retry_job_v2(:job, now(), NULL, NULL, NULL)"),
                                {"job": job_id})
            return found

    def _supersede(self, session: Session, job_id: int, reason: str) -> Superseded:
        interrupted: list[int] = []
        # An attempt that ended `succeeded` before its machine could tell the queue.
        completed: int | None = session.scalar(
            select(FleetAttemptRow.run_id).where(FleetAttemptRow.job_id == job_id,
                                                 FleetAttemptRow.state == "succeeded").limit(1))
        attempts = session.scalars(
            select(FleetAttemptRow)
            .where(FleetAttemptRow.job_id == job_id, FleetAttemptRow.state == "running")
            .with_for_update()
        ).all()
        for attempt in attempts:
            run_status = None
            if attempt.run_id is not None:
                run_status = session.scalar(
                    select(RunRow.status).where(RunRow.id == attempt.run_id).with_for_update()
                )
            if run_status == RunStatus.COMPLETED:
                attempt.state, attempt.finished_at = "succeeded", _now()
                completed = attempt.run_id
                continue
            attempt.state, attempt.error, attempt.finished_at = "stale", reason, _now()
            if attempt.run_id is not None and run_status == RunStatus.RUNNING:
                session.execute(
                    update(RunRow).where(RunRow.id == attempt.run_id, RunRow.status == RunStatus.RUNNING)
                    .values(status=RunStatus.INTERRUPTED, error=reason, finished_at=_now())
                )
                interrupted.append(attempt.run_id)
        session.execute(
            update(FleetMachineRow).where(FleetMachineRow.job_id == job_id).values(job_id=None)
        )
        return Superseded(interrupted, completed)

    def attempt(self, attempt_id: int) -> Attempt:
        with self._session() as session:
            r = session.get(FleetAttemptRow, attempt_id)
            if r is None:
                raise LookupError(f"no fleet attempt {attempt_id}")
            return _attempt(r)

    def attempts(self, job_ids: Iterable[int] | None = None) -> list[Attempt]:
        """Attempts, oldest first; of the given jobs only, if any are given."""
        with self._session() as session:
            query = select(FleetAttemptRow).order_by(FleetAttemptRow.id)
            if job_ids is not None:
                query = query.where(FleetAttemptRow.job_id.in_(list(job_ids)))
            return [_attempt(r) for r in session.scalars(query)]


def _now() -> datetime:
    return datetime.now(UTC)


def _attempt(r: FleetAttemptRow) -> Attempt:
    return Attempt(r.id, r.job_id, r.machine, r.run_id, r.state, r.error, aware(r.started_at))


def _machine(row: FleetMachineRow) -> Machine:
    facts = MachineFacts(row.name, row.machine_class, row.cpu_model, row.cpus, row.memory_bytes, row.kernel,
                         row.hostname, row.machine_id)
    return Machine(facts, aware(row.last_seen), row.worker_id, row.job_id, row.hold, row.hold_reason,
                   row.pace_ns, aware(row.health_at) if row.health_at else None, row.jobs_since_health)
