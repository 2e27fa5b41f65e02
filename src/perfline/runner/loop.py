"""The run loop: set up, warm up, measure repetitions, store each as it is taken."""

from __future__ import annotations

import os
import signal
import tempfile
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Protocol, Self

from perfline.benchmarks import (
    BENCHMARKS,
    Benchmark,
    BenchmarkFailed,
    BenchmarkUnavailable,
)
from perfline.benchmarks.base import CommandBenchmark
from perfline.monitors import MONITORS, Monitor, MonitorFailed, MonitorUnavailable, ProfilingMonitor
from perfline.monitors.files import HOST, SystemFiles
from perfline.records.errors import UserError
from perfline.records.fingerprint import Fingerprint
from perfline.records.job import AUTO_MIN_REPEAT, Case
from perfline.records.metric import Measurement, Metric
from perfline.records.status import RunStatus
from perfline.runner.host_check import HostCheck
from perfline.runner.load import cpu_hogs
from perfline.store import Store
from perfline.system import tuning
from perfline.system.cgroup import CgroupUnavailable, task_group
from perfline.system.journal import own_journal
from perfline.system.kernel_state import KernelState, KernelStateError
from perfline.system.measuring import measuring_alone
from perfline.system.process import tail
from perfline.targets.guest import GuestBenchmark
from perfline.tunables import TunableError, applied, read_back

# Errors that end a run as `failed` without being perfline bugs.
RUN_ERRORS = (BenchmarkFailed, BenchmarkUnavailable, MonitorFailed, TunableError)


class Observer(Protocol):
    """What the runner reports as it goes; the CLI draws progress from it."""

    def run_started(self, run_id: int, case: Case) -> None: ...

    def warning(self, message: str) -> None: ...

    def step_started(self, run_id: int, repetition: int | None) -> None:
        """A warm-up run (`repetition` None) or a repetition begins: after the benchmark's
        set-up, or before it where each step sets the benchmark up again (A/B runs)."""

    def step_done(self, run_id: int, repetition: int | None, values: list[Measurement]) -> None:
        """`repetition` is None for a warm-up run, whose values are not stored."""

    def run_finished(self, outcome: RunOutcome) -> None: ...


@dataclass(frozen=True)
class RunOutcome:
    run_id: int
    case: Case
    status: str
    repetitions: int
    error: str | None = None


@dataclass(frozen=True)
class RunContext:
    store: Store
    fingerprint: Callable[[], Fingerprint]
    observer: Observer
    # Every change to the kernel (tunables, a benchmark's tracefs files) goes through
    # it; one journal per process, so a crash leaves one file to restore.
    kernel: KernelState = field(default_factory=lambda: KernelState(own_journal()))
    host_check: HostCheck = field(default_factory=HostCheck)
    label: str | None = None
    kernel_commit: str | None = None
    # The built tree of the commit under test, where command benchmarks run (bisection,
    # tracking); None: the run's own temporary directory.
    tree: Path | None = None
    # The fleet job attempt the runs belong to (store.fleet), linked as each run starts.
    fleet_attempt: int | None = None
    # The kexec boot (store.kexec_boots) this machine is in, when `perfline resume`
    # measures on the kernel it booted; a kexec case runs nowhere else.
    kexec_boot: int | None = None


class CaseRun:
    """One run of one case, as a context manager: stored on enter, finished on exit.

    The exit never swallows an exception; it records what the exception means for
    this run: its own benchmark failing is `failed`, Ctrl-C/SIGTERM or a partner run
    failing (interleaved A/B) is `interrupted`, anything else is a perfline bug and
    `failed` with the traceback kept.

    `hold_setup=False` sets the benchmark up and tears it down around every step, for
    interleaving benchmarks that cannot have two instances at once (a fixed port).
    `tune_per_step=True` applies the case's tunables around every step instead of the
    whole run, so that two interleaved runs can each have their own.
    """

    def __init__(
        self,
        case: Case,
        ctx: RunContext,
        *,
        hold_setup: bool = True,
        tune_per_step: bool = False,
        settings: dict[str, Any] | None = None,
    ) -> None:
        if case.target == "kexec" and ctx.kexec_boot is None:
            raise UserError(
                f"{case.job}: a case of target kexec runs only on the kernel it boots, through `perfline run "
                "--target kexec` on a machine that allows it (docs/kexec.md); ab, bisect, track and the fleet "
                "do not boot kernels on their machine yet")
        self.case = case
        self.ctx = ctx
        self.hold_setup = hold_setup
        self.tune_per_step = tune_per_step
        self.hogs = int(case.tunables.get("load", {}).get("load", 0))
        self.settings: dict[str, Any] = dict(settings or {})
        if ctx.kexec_boot is not None:
            self.settings["kexec_boot"] = ctx.kexec_boot
        self.benchmark_cls = BENCHMARKS.get(case.benchmark)
        self.monitors: list[Monitor] = []
        # The files those monitors read: this host's, or those of the VM `_watched` booted.
        self._files: SystemFiles = HOST
        self._watched: Benchmark | None = None
        # The cgroup the benchmark's processes start in, when a monitor measures them;
        # else why there is none.
        self._tasks: Path | None = None
        self._tasks_missing = ""
        self.values: list[float] = []  # the primary metric, for the adaptive run count
        self.primary: Metric | None = None
        self.done = 0
        self.run_id = 0
        self.outcome: RunOutcome | None = None
        self._stack = ExitStack()
        self._bench: Benchmark | None = None
        self._own_failure: BaseException | None = None
        self._fingerprint: Fingerprint | None = None
        self._tuned_per_step = False
        self._described = False

    def __enter__(self) -> Self:
        refused: TunableError | None = None
        tuned: dict[str, dict[str, str]] = {}
        if not self.tune_per_step:
            # Before the fingerprint, so that it shows the values the run ran under.
            try:
                changes = self._stack.enter_context(applied(self.case.tunables, self.ctx.kernel))
                self.settings["tunables_applied"] = changes
                tuned = read_back(self.case.tunables)
            except TunableError as exc:
                refused = exc
        if refused is None:
            refused = self._tune()
        self._fingerprint = replace(self.ctx.fingerprint().with_applied(tuned),
                                    tuning=tuning.states(tuning.plan(tuning.benchmark_cpus(self.case.pin))))
        self.run_id = self.ctx.store.start_run(
            self.case,
            self._fingerprint,
            label=self.ctx.label,
            kernel_commit=self.ctx.kernel_commit,
            pid=os.getpid(),
            fleet_attempt=self.ctx.fleet_attempt,
        )
        # From the stored run on, whatever stops the start (a SIGTERM during the host
        # check's 0.3 s sample left a fleet run `running` for good) ends the run.
        try:
            self.ctx.observer.run_started(self.run_id, self.case)
            if found := self.ctx.host_check.before_run(self.ctx.kernel):
                self.settings["disturbances"] = [d.line() for d in found]
                for disturbance in self.ctx.host_check.new(found):
                    self.ctx.observer.warning(f"this run may be disturbed: {disturbance.line()}")
            workdir = self._stack.enter_context(
                tempfile.TemporaryDirectory(prefix=f"perfline-run{self.run_id}-")
            )
            self.workdir = Path(workdir)
            if refused is not None:
                self._own_failure = refused
                raise refused
            if self.case.vm is None:
                # Before the benchmark is set up: a server it starts there joins too.
                self._group_tasks()
                self.monitors = self._available_monitors(HOST, self._tasks, self._tasks_missing)
            if self.hold_setup:
                self._bench = self._own(lambda: self._stack.enter_context(self._new_benchmark()))
                self._describe(self._bench)
            self.ctx.store.set_settings(self.run_id, self.settings)
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def _tune(self) -> TunableError | None:
        """`tune: true`: the machine tuned for the whole run (the benchmark CPUs: the
        case's pin, else isolcpus), before the fingerprint reads it; reset on exit.
        What the kernel refused (a managed interrupt) is said and the run goes on."""
        if not self.case.tune:
            return None
        cpus = tuning.benchmark_cpus(self.case.pin)
        try:
            refused = self._stack.enter_context(
                tuning.tuned(cpus, self.ctx.kernel, keep_sampling="perf-profile" in self.case.monitors))
        except KernelStateError as exc:
            return TunableError(f"tune: {exc}")
        self.settings["tune"] = {"cpus": tuning.format_cpu_list(cpus), "refused": refused}
        return None

    def warm_up(self) -> None:
        for _ in range(self.case.warmup):
            self.ctx.observer.step_started(self.run_id, None)
            values = self._step(self._run_once)
            self.ctx.observer.step_done(self.run_id, None, values)

    def _run_once(self, bench: Benchmark) -> list[Measurement]:
        with cpu_hogs(self.hogs):
            return bench.run_once()

    def measure(self) -> None:
        """One repetition with the monitors around it, committed before returning."""
        repetition = self.done
        observed: list[Measurement] = []

        def monitored(bench: Benchmark) -> list[Measurement]:
            self._watch(bench)
            with ExitStack() as cleanup:
                self._files.refresh()
                for monitor in self.monitors:
                    cleanup.callback(monitor.close)
                    monitor.start()
                values = self._run_once(bench)
                self._files.refresh()
                observed.extend(m for monitor in self.monitors for m in monitor.stop())
            return values

        self.ctx.observer.step_started(self.run_id, repetition)
        values = self._step(monitored)
        store = self.ctx.store
        store.add_samples(self.run_id, repetition, values, "benchmark")
        if observed:
            store.add_samples(self.run_id, repetition, observed, "monitor")
        for monitor in self.monitors:
            if isinstance(monitor, ProfilingMonitor):
                store.add_profile(self.run_id, repetition, monitor.profile())
        self.done += 1
        if values:
            self.primary = values[0].metric
            self.values.append(values[0].value)
        self.ctx.observer.step_done(self.run_id, repetition, values)

    def wants_more(self) -> bool:
        """Fixed count: until `repeat`. Adaptive: until the CI of the mean of the primary
        (first) metric is within the precision, after at least AUTO_MIN_REPEAT runs."""
        case = self.case
        if self.done >= case.repeat:
            return False
        if case.precision_pct is None or self.done < AUTO_MIN_REPEAT:
            return True
        return _ci_halfwidth_pct(self.values) > case.precision_pct

    def save_settings(self) -> None:
        self.ctx.store.set_settings(self.run_id, self.settings)

    def record_precision(self) -> None:
        """After an adaptive run: store how precise it got, and say so if it fell short."""
        if self.case.precision_pct is None:
            return
        halfwidth = _ci_halfwidth_pct(self.values)
        reached = halfwidth <= self.case.precision_pct
        self.settings.update(
            repeat="auto",
            precision_pct=self.case.precision_pct,
            max_repeat=self.case.repeat,
            ci_halfwidth_pct=halfwidth,
            precision_reached=reached,
        )
        self.save_settings()
        if not reached:
            self.ctx.observer.warning(
                f"run {self.run_id}: reached max_repeat {self.case.repeat} with the 95% CI "
                f"of the mean at ±{halfwidth:.2f}%, not the ±{self.case.precision_pct:g}% asked"
            )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.outcome is not None:
            return
        try:
            self._stack.close()
        except BaseException as teardown_error:  # noqa: BLE001 - a teardown failing is the run's failure
            if exc is None:
                exc = teardown_error
        if exc is None:
            self._finish(RunStatus.COMPLETED)
        elif isinstance(exc, KeyboardInterrupt):
            self._finish(RunStatus.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM); finished repetitions are kept")
        elif isinstance(exc, RUN_ERRORS) and exc is self._own_failure:
            self._finish(RunStatus.FAILED, str(exc), getattr(exc, "output_tail", None) or None)
        elif isinstance(exc, RUN_ERRORS):
            self._finish(RunStatus.INTERRUPTED, f"stopped because the interleaved run failed: {exc}")
        else:
            trace = "".join(traceback.format_exception(exc))
            self._finish(RunStatus.FAILED, f"internal error: {exc!r}", tail(trace))

    def _finish(self, status: str, error: str | None = None, output_tail: str | None = None) -> None:
        stored = self.ctx.store.finish_run(self.run_id, status, error=error, output_tail=output_tail)
        if stored != status:  # finished by someone else first: a fleet job taken back as stale
            status, error = stored, self.ctx.store.get_run(self.run_id).error
        self.outcome = RunOutcome(self.run_id, self.case, status, self.done, error)
        self.ctx.observer.run_finished(self.outcome)

    def _new_benchmark(self) -> Benchmark:
        benchmark = self.benchmark_cls(self.case.params, self.workdir)
        benchmark.tree = self.ctx.tree
        benchmark.kernel = self.ctx.kernel
        benchmark.cgroup = self._tasks
        if self.case.vm is None:
            return benchmark
        assert isinstance(benchmark, CommandBenchmark)  # the job parser checks it
        return GuestBenchmark(benchmark, self.case, self.ctx.observer.warning, group_tasks=self._watches_tasks())

    def _step(self, action: Callable[[Benchmark], list[Measurement]]) -> list[Measurement]:
        def step() -> list[Measurement]:
            with ExitStack() as stack:
                if self.tune_per_step:
                    changes = stack.enter_context(applied(self.case.tunables, self.ctx.kernel))
                    self.settings["tunables_applied"] = changes
                    self._fingerprint_tuned()
                bench = self._bench or stack.enter_context(self._new_benchmark())
                if not self._described:
                    self._describe(bench)
                    self.save_settings()
                return action(bench)

        return self._own(step)

    def _describe(self, bench: Benchmark) -> None:
        """The benchmark's settings, and its own system's fingerprint where it has one (a
        VM's guest), into the run: on enter when it is set up once, else at its first step
        (an exclusive benchmark in `ab` boots its VM at every step, the same guest each time)."""
        self._described = True
        self.settings.update(bench.settings())
        if (system := bench.fingerprint()) is not None:
            self._fingerprint = system
            self.ctx.store.set_fingerprint(self.run_id, system)

    def _fingerprint_tuned(self) -> None:
        """With tunables applied per step: once, while they are, add what they read
        back to the fingerprint taken before (the run's start knew only the old values)."""
        if self._tuned_per_step:
            return
        self._tuned_per_step = True
        assert self._fingerprint is not None  # taken on enter
        if tuned := read_back(self.case.tunables):
            self._fingerprint = self._fingerprint.with_applied(tuned)
            self.ctx.store.set_fingerprint(self.run_id, self._fingerprint)

    def _own(self, action: Callable[[], Any]) -> Any:
        """Run `action`; a benchmark error it raises is this run's own failure."""
        try:
            return action()
        except RUN_ERRORS as exc:
            self._own_failure = exc
            raise

    def _watch(self, bench: Benchmark) -> None:
        """For a case in a VM, once its VM is up: the monitors, reading the guest's files
        (a benchmark set up per step boots a VM per step, each watched anew)."""
        if not isinstance(bench, GuestBenchmark) or bench is self._watched:
            return
        kinds = [MONITORS.get(name) for name in self.case.monitors]
        sources = [pattern for kind in kinds for pattern in kind.sources]
        if bench.cgroup is not None:
            sources += [f"{bench.cgroup}/{name}" for kind in kinds for name in kind.task_files]
        self._files = bench.files(sources)
        self._files.refresh()
        self._watched = bench
        self.monitors = self._available_monitors(self._files, bench.cgroup, bench.cgroup_missing)
        self.save_settings()

    def _watches_tasks(self) -> bool:
        """A monitor of the case measures the benchmark's own tasks."""
        return any(MONITORS.get(name).task_files for name in self.case.monitors)

    def _group_tasks(self) -> None:
        """When a monitor measures the benchmark's own tasks: a cgroup for the run, which
        every process the benchmark starts on this host joins at its spawn
        (`system.cgroup`). Where none can be made the monitor says so; the run goes on.
        A VM's guest makes its own (`GuestBenchmark`)."""
        if not self._watches_tasks():
            return
        try:
            self._tasks = self._stack.enter_context(task_group(self.ctx.kernel))
        except CgroupUnavailable as exc:
            self._tasks_missing = f"not measured: {exc}"

    def _available_monitors(self, files: SystemFiles, tasks: Path | None, tasks_missing: str) -> list[Monitor]:
        """The case's monitors of the system whose files these are; one that system
        cannot support is skipped loudly, and one that can give only part of its figures
        says which part it cannot. `tasks`: the cgroup of the benchmark's tasks on that
        system, or None and `tasks_missing` says why.

        A missing monitor loses context, not results, so the benchmark still runs; the
        skip is printed and stored in the run's settings (once, for VMs booted per step).
        """
        monitors = []
        for name in self.case.monitors:
            try:
                monitor = MONITORS.get(name).on(files)
                if monitor.task_files:
                    monitor.tasks, monitor.tasks_missing = tasks, tasks_missing
                monitor.check()
            except MonitorUnavailable as exc:
                self._say_once("monitors_skipped", f"{name}: {exc}", f"monitor {name} skipped: {exc}")
                continue
            for gap in monitor.gaps():
                self._say_once("monitors_partial", f"{name}: {gap}", f"monitor {name}: {gap}")
            monitors.append(monitor)
        return monitors

    def _say_once(self, setting: str, line: str, warning: str) -> None:
        """Print a warning and keep its line in the run's settings, unless it is there
        already (a VM booted per step has its monitors checked at every step)."""
        lines = self.settings.setdefault(setting, [])
        if line not in lines:
            self.ctx.observer.warning(warning)
            lines.append(line)


def _ci_halfwidth_pct(values: list[float]) -> float:
    # Imported here: scipy costs a second at start-up and only --repeat auto needs it.
    from perfline.stats.two_sample import mean_ci_halfwidth_pct

    return mean_ci_halfwidth_pct(values)


def execute(case: Case, ctx: RunContext) -> RunOutcome:
    """Run one case to completion, failure or interruption; the outcome is stored either way.

    KeyboardInterrupt (Ctrl-C, or SIGTERM under `terminate_as_interrupt`) is re-raised
    after the run is marked interrupted, so a job's remaining cases are not started.
    """
    run = CaseRun(case, ctx)
    try:
        with _machine_turn(f"measuring {case.benchmark} ({ctx.label or 'no label'})", ctx), run:
            run.warm_up()
            while run.wants_more():
                run.measure()
            run.record_precision()
    except RUN_ERRORS:
        pass  # recorded as the run's failure by CaseRun
    assert run.outcome is not None
    return run.outcome


def execute_interleaved(
    case_a: Case, case_b: Case, pairs: int, ctx: RunContext,
    done: Callable[[Metric, list[float], list[float]], bool] | None = None,
    ctx_b: RunContext | None = None,
    settings: Mapping[str, Any] | None = None,
) -> list[RunOutcome]:
    """A B, B A, A B, …: each pair measures both sides back to back so that drift of the
    machine (thermal, background load, page cache) affects both alike, and the order
    alternates (ABBA) so that whatever the second of a pair gains or loses from the
    first (a warm cache, a raised clock) falls on both sides equally: with A always
    first, a 0.5% order effect gave 4.2% false verdicts. The order is stored with the
    runs (setting `order`).

    `done(metric, a_values, b_values)`, asked after every pair with the primary metric,
    ends the measuring early (`ab --pairs auto`); `pairs` is then the most there can be.
    `ctx_b`: side B's own context (another commit's built tree), else both share `ctx`.
    `settings`: stored with both runs from their start (a record's confirmation: which
    record, which attempt), so a run killed midway carries them too.

    Returns the outcomes of the runs that started: both, unless side A could not even
    be set up, in which case B was never created.
    """
    exclusive = BENCHMARKS.get(case_a.benchmark).exclusive or BENCHMARKS.get(
        case_b.benchmark
    ).exclusive
    a, b = (
        CaseRun(case, here, hold_setup=not exclusive, tune_per_step=True,
                settings={**(settings or {}), "interleaved": name})
        for case, name, here in ((case_a, "A", ctx), (case_b, "B", ctx_b or ctx))
    )
    try:
        with _machine_turn(f"measuring an A/B of {case_a.benchmark} ({ctx.label or 'no label'})", ctx), a, b:
            a.warm_up()
            b.warm_up()
            order = pair_order(pairs)
            for run in (a, b):
                run.settings["order"] = ",".join(order)
                run.save_settings()
            for measured, first_second in enumerate(order, start=1):
                for side in first_second:
                    (a if side == "A" else b).measure()
                if (done is not None and measured < pairs and a.primary is not None
                        and done(a.primary, a.values, b.values)):
                    for run in (a, b):
                        run.settings["order"] = ",".join(order[:measured])
                    break
            a.save_settings()
            b.save_settings()
    except RUN_ERRORS:
        pass  # recorded by the CaseRun that failed; the other one says it was stopped
    return [run.outcome for run in (a, b) if run.outcome is not None]


def _machine_turn(what: str, ctx: RunContext) -> AbstractContextManager[None]:
    """The run measures alone on the machine (system.measuring): from before its
    fingerprint and tunables to its last repetition."""
    return measuring_alone(what, ctx.observer.warning)


def pair_order(pairs: int) -> list[str]:
    """AB, BA, AB, BA, …: balanced over every two pairs, so a linear drift and a
    first-versus-second effect cancel in the paired comparison."""
    return ["AB" if i % 2 == 0 else "BA" for i in range(pairs)]


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C so that a killed run is marked interrupted, not lost.

    SIGINT gets Python's Ctrl-C handler too: a process started in the background by a
    non-interactive shell inherits SIGINT ignored, and Python then installs no handler,
    so `kill -INT` would not stop the run at all (the SIGINT test failed only when the
    suite itself ran in the background)."""

    def handler(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
