"""The run loop: set up, warm up, measure N repetitions, store each as it is taken."""

from __future__ import annotations

import os
import signal
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Protocol

from perfline.benchmarks import BENCHMARKS, Benchmark, BenchmarkFailed, BenchmarkUnavailable
from perfline.fingerprint import Fingerprint
from perfline.jobs.spec import Case
from perfline.metric import Measurement
from perfline.monitors import MONITORS, Monitor, MonitorUnavailable, ProfilingMonitor
from perfline.process import tail
from perfline.store import COMPLETED, FAILED, INTERRUPTED, Store


class Observer(Protocol):
    """What the runner reports as it goes; the CLI draws progress from it."""

    def run_started(self, run_id: int, case: Case) -> None: ...

    def warning(self, message: str) -> None: ...

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
    label: str | None = None
    kernel_commit: str | None = None


def execute(case: Case, ctx: RunContext) -> RunOutcome:
    """Run one case to completion, failure or interruption; the outcome is stored either way.

    KeyboardInterrupt (Ctrl-C, or SIGTERM under `terminate_as_interrupt`) is re-raised
    after the run is marked interrupted, so a job's remaining cases are not started.
    """
    benchmark_cls = BENCHMARKS.get(case.benchmark)
    monitors, skipped = _available_monitors(case.monitors, ctx.observer)
    run_id = ctx.store.start_run(
        case, ctx.fingerprint(), label=ctx.label, kernel_commit=ctx.kernel_commit, pid=os.getpid()
    )
    ctx.observer.run_started(run_id, case)
    if case.tunables:
        ctx.observer.warning(
            "this perfline version records the job's tunables but does not apply them; "
            "the run's settings say tunables_applied: false"
        )
    done = 0

    def finish(status: str, error: str | None = None, output_tail: str | None = None) -> RunOutcome:
        ctx.store.finish_run(run_id, status, error=error, output_tail=output_tail)
        outcome = RunOutcome(run_id, case, status, done, error)
        ctx.observer.run_finished(outcome)
        return outcome

    try:
        with tempfile.TemporaryDirectory(prefix=f"perfline-run{run_id}-") as workdir:
            with benchmark_cls(case.params, Path(workdir)) as bench:
                settings = dict(bench.settings())
                if skipped:
                    settings["monitors_skipped"] = skipped
                if case.tunables:
                    settings["tunables_applied"] = False
                ctx.store.set_settings(run_id, settings)
                for _ in range(case.warmup):
                    ctx.observer.step_done(run_id, None, bench.run_once())
                for repetition in range(case.repeat):
                    _measure(bench, monitors, run_id, repetition, ctx)
                    done += 1
    except KeyboardInterrupt:
        finish(INTERRUPTED, "interrupted (Ctrl-C or SIGTERM); finished repetitions are kept")
        raise
    except BenchmarkFailed as exc:
        return finish(FAILED, str(exc), exc.output_tail)
    except BenchmarkUnavailable as exc:
        return finish(FAILED, str(exc))
    except Exception as exc:
        # A perfline bug: keep the evidence with the run, then let the traceback surface.
        finish(FAILED, f"internal error: {exc!r}", tail(traceback.format_exc()))
        raise
    return finish(COMPLETED)


def _measure(
    bench: Benchmark, monitors: list[Monitor], run_id: int, repetition: int, ctx: RunContext
) -> None:
    with ExitStack() as cleanup:
        for monitor in monitors:
            cleanup.callback(monitor.close)
            monitor.start()
        values = bench.run_once()
        observed = [m for monitor in monitors for m in monitor.stop()]
    ctx.store.add_samples(run_id, repetition, values, "benchmark")
    if observed:
        ctx.store.add_samples(run_id, repetition, observed, "monitor")
    for monitor in monitors:
        if isinstance(monitor, ProfilingMonitor):
            ctx.store.add_profile(run_id, repetition, monitor.profile())
    ctx.observer.step_done(run_id, repetition, values)


def _available_monitors(names: tuple[str, ...], observer: Observer) -> tuple[list[Monitor], list[str]]:
    """Instantiate the monitors; one this system cannot support is skipped loudly, not fatal.

    A missing monitor loses context, not results, so the benchmark still runs; the
    skip is printed and stored in the run's settings.
    """
    monitors, skipped = [], []
    for name in names:
        monitor = MONITORS.get(name)()
        try:
            monitor.check()
        except MonitorUnavailable as exc:
            observer.warning(f"monitor {name} skipped: {exc}")
            skipped.append(f"{name}: {exc}")
            continue
        monitors.append(monitor)
    return monitors, skipped


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C so that a killed run is marked interrupted, not lost."""

    def handler(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
