"""`perfline worker`: one test machine taking jobs from the fleet's queue, one at a time.

The main thread runs the jobs (a benchmark owns the machine, and SIGTERM arrives
there); a heartbeat thread tells procrastinate and the store that the machine lives.
Between jobs the worker looks at its machine's hold (`drain`: stop; `bad`: take
nothing until `fleet enable`; `retired`: stop), runs the health job when it is due,
and takes back the jobs of machines that fell silent (fleet.stalled).

Every job is one case. Its run is tied to the attempt (store.fleet), and the attempt
ends with a conditional update, so a job is done once even when a machine that was
thought dead finishes late. The database going away (a restart) makes every call wait
and retry, up to the outage wait; nothing is dropped.

A kernel job (fleet.kernel_jobs) ends the worker: the machine boots the job's kernel,
and `perfline resume` goes on after the boot. A worker that starts while its machine has
a kexec boot open (the resume has not closed it yet) waits for that first, so its health
job runs on the default kernel it came back to. A kernel tracker's confirmation or
bisection (fleet.kernel_narrowing) boots the machine many times: after each, the new
worker takes the job up again (its attempt and queue row become its own) and goes on.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy.exc import DBAPIError

from perfline.fleet import health, kernel_jobs, kernel_narrowing
from perfline.fleet.kinds import JobResult, run_job
from perfline.fleet.queue import FleetQueue, QueuedJob, WorkerForgotten, class_queue, machine_queue
from perfline.fleet.stalled import take_back_stalled
from perfline.records.metric import Measurement
from perfline.records.status import RunStatus
from perfline.runner import RunContext, RunOutcome
from perfline.runner.kexec_resume import THIS_MACHINE, BootSteps, MachineBooting
from perfline.store import Store
from perfline.store.fleet import MachineFacts
from perfline.system.process import tail
from perfline.system.signals import leave_signals_to_main_thread
from perfline.targets import local

log = logging.getLogger(__name__)


class Cancelled(KeyboardInterrupt):
    """`fleet cancel` of the running job: raised between repetitions, so the runner marks
    the run interrupted as it does for Ctrl-C; the worker goes on with the next job."""


@dataclass(frozen=True)
class WorkerSettings:
    stalled_s: float
    poll_s: float = 1.0
    health_every: int = 50
    # How long the database may be away (a restart) before the worker gives up.
    outage_wait_s: float = 600.0

    @property
    def heartbeat_s(self) -> float:
        # Four heartbeats within the stalled timeout: one lost beat never looks like death.
        return max(0.2, min(10.0, self.stalled_s / 4))


class FleetWorker:
    def __init__(self, store: Store, queue: FleetQueue, facts: MachineFacts, settings: WorkerSettings,
                 say: Callable[[str], None], images: Path | None = None,
                 boot_steps: BootSteps = THIS_MACHINE) -> None:
        self.store, self.queue, self.facts, self.settings, self.say = store, queue, facts, settings, say
        # Kernel jobs: the fleet's shared directory of built kernels, and how this machine boots.
        self.images, self.boot_steps = images, boot_steps
        # Set once the machine is going down into a kernel job's kernel: the job is the
        # resume's now, whatever stops this worker.
        self.booting: MachineBooting | None = None
        self._going_down = False
        self.queues = [class_queue(facts.machine_class), machine_queue(facts.name)]
        self.worker_id = 0
        self.job: QueuedJob | None = None
        # Set by the heartbeat thread when the running job was cancelled; read between repetitions.
        self.cancelled = False
        self._stop_beating = threading.Event()
        self._last_sweep = 0.0

    def serve(self) -> str:
        """Take jobs until the machine is drained or retired (returns why), or until
        SIGTERM/Ctrl-C (KeyboardInterrupt, after the running job went back to the queue)."""
        self._wait_for_resume()
        self.worker_id = self.queue.register_worker()
        machine = self.store.register_machine(self.facts, self.worker_id)
        beating = threading.Thread(target=self._heartbeats, name="fleet-heartbeat", daemon=True)
        try:
            if machine.hold in ("drain", "retired"):
                return f"machine {self.facts.name} is {_held(machine.hold)}; `perfline fleet enable {self.facts.name}`"
            beating.start()
            self.say(f"machine {self.facts.name} (class {self.facts.machine_class}) takes jobs from "
                     f"{', '.join(self.queues)}")
            if machine.hold is None:
                self._health()
            return self._loop()
        finally:
            self._stop_beating.set()
            if beating.is_alive():
                beating.join(timeout=5)
            self.store.machine_left(self.facts.name, self.worker_id)
            self.queue.unregister_worker(self.worker_id)

    def _wait_for_resume(self) -> None:
        """This machine's kexec boot still open: `perfline resume` (its unit runs before the
        worker's) has not closed it, or is about to reboot into the default kernel."""
        machine_id = local.machine_id(self.boot_steps.root)
        said = False
        while (boot := self.store.open_kexec_boot(machine_id)) is not None:
            if not said:
                self.say(f"kexec boot {boot.id} of this machine is {boot.state}: waiting for `perfline resume` "
                         "to close it (`perfline resume --abandon` gives it up)")
                said = True
            time.sleep(self.settings.poll_s)

    def _loop(self) -> str:
        while True:
            try:
                taken = self._next_job()
            except DBAPIError as exc:
                # A read cut by a server restart: the next one waits for the server (store.engine).
                if not exc.connection_invalidated:
                    raise
                time.sleep(self.settings.poll_s)
                continue
            if isinstance(taken, str):
                return taken
            if taken is None:
                time.sleep(self.settings.poll_s)
                continue
            job, carried = taken
            self._process(job, carried)
            if self.booting is not None:
                boot = self.booting.boot
                return (f"kexec boot {boot.id}: booting {boot.kernel} ({boot.release}) for job {job.id}; "
                        "`perfline resume` goes on after the boot")

    def _next_job(self) -> tuple[QueuedJob, int | None] | str | None:
        """Between jobs: the machine's hold (why it stops, as a string), the sweep, the
        health job when due, then a job this machine carries over its boots (with its
        attempt), else the next job of its queues (a new attempt), if any."""
        machine = self.store.fleet_machine(self.facts.name)
        if machine.hold in ("drain", "retired"):
            return f"machine {self.facts.name} {_held(machine.hold)}: stopped"
        self._sweep()
        if machine.hold == "bad":
            return None
        if machine.jobs_since_health >= self.settings.health_every:
            self._health()
            return None
        if (carried := self._between_boots()) is not None:
            return carried
        try:
            job = self.queue.fetch(self.queues, self.worker_id)
            return None if job is None else (job, None)
        except WorkerForgotten:
            self.worker_id = self.queue.register_worker()
            self.store.register_machine(self.facts, self.worker_id)
            self.say(f"registered again (worker {self.worker_id}): this machine was silent for longer "
                     f"than {self.settings.stalled_s:g} s")
            return None

    def _between_boots(self) -> tuple[QueuedJob, int] | None:
        """A job this machine was carrying over its boots when it went down: taken up
        again by this worker (its heartbeats now keep the job from the sweep)."""
        for attempt in self.store.attempts_between_boots(self.facts.name):
            [job] = self.queue.jobs(self.store.attempt(attempt).job_id)
            if job.args.get("kind") in kernel_narrowing.KINDS and self.store.take_up_attempt(attempt,
                                                                                              self.worker_id):
                self.say(f"job {job.id}: back from a boot; going on (attempt {attempt})")
                return job, attempt
        return None

    def _process(self, job: QueuedJob, carried: int | None = None) -> None:
        attempt = carried or self.store.start_attempt(job.id, self.facts.name, self.worker_id)
        if attempt is None:
            self.say(f"job {job.id}: taken back before it began (this machine was silent); left to the others")
            return
        self.job, self.cancelled = job, False
        self.store.machine_job(self.facts.name, job.id)
        if carried is None:
            self.say(f"job {job.id}: started (attempt {job.attempts + 1})")
        try:
            outcome = self._run(job, attempt)
        except MachineBooting as booting:
            # The attempt stays running: the resume after the boot ends it.
            self.booting = booting
            self.say(f"job {job.id}: {booting}; the machine goes down")
            return
        except Cancelled:
            if self.store.end_attempt(attempt, "cancelled", "cancelled by `perfline fleet cancel`"):
                self.queue.finish(job.id, "aborted")
            self.say(f"job {job.id}: cancelled")
            return
        except KeyboardInterrupt:
            if self._going_down:  # systemd stopping the worker for the boot: the job is the resume's
                raise
            if self.store.end_attempt(attempt, "interrupted", "the worker was stopped (SIGTERM or Ctrl-C)"):
                self.queue.requeue(job.id)
                self.say(f"job {job.id}: interrupted, queued again")
            raise
        except Exception as exc:  # a job that cannot run fails alone, not the worker
            self._going_down = False  # the boot did not start (start() abandoned it)
            log.debug("job %s", job.id, exc_info=True)
            error = f"{type(exc).__name__}: {exc}\n{tail(traceback.format_exc())}"
            if self.store.end_attempt(attempt, "failed", error):
                self.queue.finish(job.id, "failed")
            self.say(f"job {job.id}: failed: {exc}")
            return
        finally:
            self.job = None
            self.store.machine_job(self.facts.name, None)
        state = "succeeded" if outcome.status == RunStatus.COMPLETED else "failed"
        if self.store.end_attempt(attempt, state, outcome.error):
            self.queue.finish(job.id, state)
            self.say(f"job {job.id}: {state}" + (f", run {outcome.run_id}" if outcome.run_id else "")
                     + (f": {outcome.error}" if outcome.error and state == "failed" else ""))
        else:
            self.say(f"job {job.id}: was taken back while this machine was silent; "
                     f"run {outcome.run_id} stays {outcome.status}")

    def _run(self, job: QueuedJob, attempt: int) -> JobResult:
        if self.queue.abort_requested(job.id):  # cancelled while its machine was booting
            raise Cancelled
        ctx = RunContext(store=self.store, fingerprint=local.fingerprint, observer=_AttemptObserver(self, attempt),
                         fleet_attempt=attempt)
        kind = job.args.get("kind")
        if kind == kernel_jobs.KIND:
            kernel_jobs.boot(self.store, job.args, self.say, self._boot_steps(attempt), self.images)
        if kind in kernel_narrowing.KINDS:
            return kernel_narrowing.run(self.store, job.args, self.say, self._boot_steps(attempt), self.images)
        return run_job(self.store, ctx, job.args, self.say)

    def _boot_steps(self, attempt: int) -> BootSteps:
        """How this machine boots for the attempt: the boot carries it, and once the machine
        is going down, systemd stopping the worker leaves the job to the resume."""
        def down() -> None:
            self._going_down = True
            self.boot_steps.boot()

        return replace(self.boot_steps, boot=down, fleet_attempt=attempt)

    def _health(self) -> None:
        ctx = RunContext(store=self.store, fingerprint=local.fingerprint, observer=_AttemptObserver(self, None),
                         label=health.LABEL)
        verdict = health.check(self.store, self.facts, ctx)
        if verdict.problem is None:
            self.say(f"health: pace {verdict.pace_ns / 1000 if verdict.pace_ns else 0:.0f} µs, run {verdict.run_id}")
        else:
            self.say(f"health: bad: {verdict.problem}; takes no jobs until `perfline fleet enable "
                     f"{self.facts.name}`")

    def _sweep(self) -> None:
        """Take back dead machines' jobs, every heartbeat interval, but only once this
        worker has been connected for two of them: after an outage, live machines need
        a beat to say so before their silence is taken for death."""
        now = time.monotonic()
        interval = self.settings.heartbeat_s
        if now - self._last_sweep < interval or now - self.queue.answering_since < 2 * interval:
            return
        self._last_sweep = now
        for taken in take_back_stalled(self.store, self.queue, self.settings.stalled_s):
            what = ("ended boot-failed: the machine did not come back from the job's kernel" if taken.boot_failed
                    else "queued again" if taken.requeued else "done: its run had completed")
            cut = f" (run {', '.join(map(str, taken.interrupted_runs))} interrupted)" if taken.interrupted_runs else ""
            self.say(f"job {taken.job_id}: its machine fell silent; {what}{cut}")

    def _heartbeats(self) -> None:
        """Every call waits through an outage (up to the outage wait); one that fails
        even so is said and tried again at the next beat."""
        leave_signals_to_main_thread()
        while not self._stop_beating.wait(self.settings.heartbeat_s):
            try:
                self.queue.heartbeat(self.worker_id)
                self.store.machine_seen(self.facts.name, self.worker_id)
                job = self.job
                self.cancelled = job is not None and self.queue.abort_requested(job.id)
            except Exception as exc:  # noqa: BLE001 - a lost beat must not end the worker
                self.say(f"heartbeat failed: {str(exc).strip().splitlines()[0]}")


class _AttemptObserver:
    """The runner's observer for a fleet job: says what happens, and stops the run
    between repetitions when the job was cancelled."""

    def __init__(self, worker: FleetWorker, attempt: int | None) -> None:
        self.worker, self.attempt = worker, attempt

    def run_started(self, run_id: int, case: object) -> None:
        pass

    def warning(self, message: str) -> None:
        self.worker.say(f"warning: {message}")

    def step_started(self, run_id: int, repetition: int | None) -> None:
        pass

    def step_done(self, run_id: int, repetition: int | None, values: list[Measurement]) -> None:
        if self.attempt is not None and self.worker.cancelled:
            raise Cancelled

    def run_finished(self, outcome: RunOutcome) -> None:
        pass


def _held(hold: str) -> str:
    return {"drain": "drained", "retired": "retired", "bad": "marked bad"}.get(hold, hold)
