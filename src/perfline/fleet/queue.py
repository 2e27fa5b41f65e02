"""The fleet's job queue: procrastinate's tables in the store's PostgreSQL database.

procrastinate gives the queue (priorities, per-queue routing, locks, `doing` jobs tied
to a registered worker with heartbeats, stalled-job lookup, retry and cancel). Its
`Worker` loop is not used: it stops when the database goes away (procrastinate issue
#1116: "the worker will crash" on a lost connection) and it takes the next job as soon
as one ends, where a fleet machine must first look at its hold (drain, bad) and its
health; `perfline.fleet.worker` is that loop, on procrastinate's job manager.

Its job manager is asynchronous. A queue owns an event loop in a thread of its own, so
the caller's main thread (where a benchmark runs and where SIGTERM arrives) stays free;
every call waits for the server through a restart, up to `outage_wait_s`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Coroutine, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import procrastinate
import psycopg
from procrastinate import jobs as pjobs
from procrastinate import utils
from procrastinate.exceptions import ConnectorException
from procrastinate.schema import SchemaManager
from sqlalchemy.engine import make_url

from perfline.records.errors import UserError
from perfline.system.patience import patiently
from perfline.system.signals import leave_signals_to_main_thread

log = logging.getLogger(__name__)
# The pool logs every refused connection during an outage; `_call` says it once.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

T = TypeVar("T")
TASK = "perfline.fleet.run_case"
# Advisory lock keys: two workers starting at once install the schema once; two
# machines looking for stalled jobs at once do not both queue the same job again.
SCHEMA_LOCK = 0x70657266  # "perf"
STALLED_LOCK = 0x70657267


FINISHED = ("succeeded", "failed", "cancelled", "aborted")


class WorkerForgotten(Exception):
    """The worker's registration was removed: it fell silent for longer than the
    stalled timeout (an outage), and another machine took its job back."""


class FleetNeedsPostgres(UserError):
    pass


@dataclass(frozen=True)
class QueuedJob:
    id: int
    queue: str
    status: str  # procrastinate's: todo, doing, succeeded, failed, cancelled, aborting, aborted
    priority: int
    attempts: int
    args: dict[str, Any]
    worker_id: int | None


def class_queue(machine_class: str) -> str:
    return f"class:{machine_class}"


def machine_queue(name: str) -> str:
    return f"machine:{name}"


def conninfo(url: str) -> str:
    """The store's SQLAlchemy URL as libpq's (procrastinate's connector speaks psycopg)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise FleetNeedsPostgres(
            f"the fleet's queue lives in PostgreSQL; the store is {parsed.get_backend_name()} "
            "(point --db or $PERFLINE_DB at a postgresql+psycopg:// store)"
        )
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


class FleetQueue:
    """procrastinate's job manager, callable from synchronous code."""

    def __init__(self, url: str, outage_wait_s: float = 0.0) -> None:
        self.conninfo = conninfo(url)
        self.outage_wait_s = outage_wait_s
        # Since when calls have gone through: after an outage, other machines' silence
        # during it is not yet a sign of their death (fleet.worker waits before sweeping).
        self.answering_since = time.monotonic()
        self._lost = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve_loop, name="fleet-queue", daemon=True)
        self._thread.start()
        # procrastinate has the pool check each connection as it is taken, so the first
        # use after a server restart gets a new connection instead of a dead one's error.
        self._connector = procrastinate.PsycopgConnector(conninfo=self.conninfo, min_size=1, max_size=4,
                                                         timeout=5.0)
        self.app = procrastinate.App(connector=self._connector)
        self._ensure_schema()
        self._call(self._connector.open_async)

    def _serve_loop(self) -> None:
        leave_signals_to_main_thread()
        self._loop.run_forever()

    def close(self) -> None:
        try:
            self._call(self._connector.close_async)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _ensure_schema(self) -> None:
        """procrastinate's tables, installed on first use of the fleet in a database."""
        def install() -> None:
            with psycopg.connect(self.conninfo, autocommit=False) as connection:
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                found = connection.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
                if found is None or found[0] is None:
                    connection.execute(SchemaManager.get_schema())

        patiently(install, lambda exc: isinstance(exc, psycopg.OperationalError), self.outage_wait_s)

    @contextmanager
    def exclusively(self, key: int) -> Iterator[bool]:
        """Whether this process holds the advisory lock `key` (held until the block
        ends); False at once when another holds it."""
        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            row = connection.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            held = bool(row and row[0])
            try:
                yield held
            finally:
                if held:
                    connection.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def _call(self, make: Any, *args: Any, **kwargs: Any) -> Any:
        """`make(*args, **kwargs)` (a coroutine function) on the queue's loop; a lost
        server is waited for, the call made again, up to `outage_wait_s`."""
        def attempt() -> Any:
            coroutine: Coroutine[Any, Any, Any] = make(*args, **kwargs)
            return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

        def lost(exc: BaseException) -> None:
            if not self._lost:
                log.warning("fleet queue: the database does not answer (%s); waiting", _first_line(exc))
            self._lost = True

        result = patiently(attempt, _connection_lost, self.outage_wait_s, lost)
        if self._lost:
            self._lost, self.answering_since = False, time.monotonic()
            log.warning("fleet queue: the database answers again")
        return result

    # -- submitting and reading ---------------------------------------------------------

    def submit(self, queue: str, args: Iterable[dict[str, Any]], priority: int = 0) -> list[int]:
        jobs = [
            pjobs.Job(id=None, queue=queue, lock=None, queueing_lock=None, task_name=TASK, priority=priority,
                      task_kwargs=kwargs)
            for kwargs in args
        ]
        deferred = self._call(self.app.job_manager.batch_defer_jobs_async, jobs)
        return [job.id for job in deferred]

    def jobs(self, job_id: int | None = None) -> list[QueuedJob]:
        found = self._call(self.app.job_manager.list_jobs_async, id=job_id, task=TASK)
        return [_queued(job) for job in found]

    def cancel(self, job_id: int) -> bool:
        """A queued job is cancelled; a running one is asked to abort (its worker stops
        the run, marks it interrupted and ends the job aborted)."""
        return bool(self._call(self.app.job_manager.cancel_job_by_id_async, job_id, abort=True))

    # -- what a worker does -------------------------------------------------------------

    def register_worker(self) -> int:
        return int(self._call(self.app.job_manager.register_worker))

    def heartbeat(self, worker_id: int) -> None:
        self._call(self.app.job_manager.update_heartbeat, worker_id)

    def unregister_worker(self, worker_id: int) -> None:
        self._call(self.app.job_manager.unregister_worker, worker_id)

    def fetch(self, queues: list[str], worker_id: int) -> QueuedJob | None:
        """The next job of these queues, by priority then age, now `doing` for this
        worker; raises WorkerForgotten when the worker was taken for dead meanwhile."""
        try:
            job = self._call(self.app.job_manager.fetch_job, queues, worker_id)
        except ConnectorException as exc:
            if isinstance(exc.__cause__, psycopg.errors.ForeignKeyViolation):
                raise WorkerForgotten(worker_id) from exc
            raise
        return None if job is None else _queued(job)

    def finish(self, job_id: int, status: str) -> None:
        try:
            self._call(self.app.job_manager.finish_job_by_id_async, job_id, pjobs.Status(status), False)
        except ConnectorException:
            # Retried after a lost answer, the first call may have finished it already.
            if self.jobs(job_id)[0].status not in FINISHED:
                raise

    def requeue(self, job_id: int) -> None:
        """Back to `todo` in its queue, for the next free machine there (attempts + 1)."""
        self._call(self.app.job_manager.retry_job_by_id_async, job_id, utils.utcnow())

    def abort_requested(self, job_id: int) -> bool:
        return int(job_id) in set(self._call(self.app.job_manager.list_jobs_to_abort_async))

    def stalled(self, seconds_since_heartbeat: float) -> list[QueuedJob]:
        """Running jobs whose worker has not sent a heartbeat for that long (or is gone)."""
        found = self._call(self.app.job_manager.get_stalled_jobs, task_name=TASK,
                           seconds_since_heartbeat=seconds_since_heartbeat)
        return [_queued(job) for job in found]

    def prune_workers(self, seconds_since_heartbeat: float) -> list[int]:
        return list(self._call(self.app.job_manager.prune_stalled_workers, seconds_since_heartbeat))


def _queued(job: pjobs.Job) -> QueuedJob:
    assert job.id is not None
    return QueuedJob(job.id, job.queue, str(job.status), job.priority, job.attempts, dict(job.task_kwargs),
                     job.worker_id)


def _connection_lost(exc: BaseException) -> bool:
    """Whether a queue call failed because the server is away (not for a reason of its own)."""
    if not isinstance(exc, ConnectorException | psycopg.OperationalError):
        return False
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, psycopg.OperationalError):
            return True
        text = str(cause).lower()
        if "connection" in text or "terminating" in text:
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _first_line(exc: BaseException) -> str:
    text = str(exc.__cause__ or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
