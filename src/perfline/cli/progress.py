"""A Rich progress bar with ETA, fed by the runner's observer callbacks; off a terminal,
where no bar is drawn, a line at least every minute and the job's estimate."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from perfline.records.job import Case
from perfline.records.metric import Measurement
from perfline.records.status import RunStatus
from perfline.runner import RunOutcome

# Off a terminal (a log file, a timer's journal) the bar is not drawn and a repetition
# of a VM under TCG can take minutes: while a step is in progress, a line this often.
HEARTBEAT_S = 60.0
# A warm-up this long means a job of hours: its estimate is said as soon as it is known.
ESTIMATE_AFTER_S = 30.0


@dataclass
class _Run:
    case: Case
    started: float
    steps: int = 0
    warmups: int = 0
    expected_s: float | None = None  # the warm-up's duration, else the last repetition's
    step: str | None = None  # "repetition 3/100" or "warm-up 1/1", while one is in progress
    step_started: float = 0.0


class ProgressObserver:
    """Draws on `console`, which should be stderr so that stdout carries only results."""

    def __init__(self, console: Console, cases: list[Case], heartbeat_s: float = HEARTBEAT_S,
                 estimate_after_s: float = ESTIMATE_AFTER_S) -> None:
        self._cases = cases
        self._console = console
        self._heartbeat_s, self._estimate_after_s = heartbeat_s, estimate_after_s
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[last]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._steps_left = sum(c.warmup + c.repeat for c in cases)
        self._task = self._progress.add_task("starting", total=self._steps_left, last="")
        # A/B runs are both open at once: each run's own state, by id.
        self._runs: dict[int, _Run] = {}
        self._lock = threading.Lock()  # the heartbeat thread reads what the runner's thread writes
        self._stopped = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name="perfline-progress", daemon=True)

    def __enter__(self) -> Self:
        self._progress.start()
        if not self._console.is_terminal:
            self._heartbeat.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped.set()
        if self._heartbeat.is_alive():
            self._heartbeat.join()
        self._progress.stop()

    def run_started(self, run_id: int, case: Case) -> None:
        with self._lock:
            self._runs[run_id] = _Run(case, time.monotonic())
        index = self._cases.index(case) + 1
        label = f"run {run_id} {case.benchmark} {case.key}"
        if len(self._cases) > 1:
            label = f"[{index}/{len(self._cases)}] {label}"
        self._progress.update(self._task, description=label, last="")

    def warning(self, message: str) -> None:
        self._progress.console.print(
            f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True
        )

    def step_started(self, run_id: int, repetition: int | None) -> None:
        with self._lock:
            run = self._runs[run_id]
            run.step = (f"warm-up {run.warmups + 1}/{run.case.warmup}" if repetition is None
                        else f"repetition {repetition + 1}/{run.case.repeat}")
            run.step_started = time.monotonic()

    def step_done(self, run_id: int, repetition: int | None, values: list[Measurement]) -> None:
        with self._lock:
            run = self._runs[run_id]
            took = time.monotonic() - run.step_started
            run.step = None
            run.steps += 1
            self._steps_left -= 1
            if repetition is None:
                run.warmups += 1
            if repetition is None or run.warmups == 0:
                run.expected_s = took
            steps_left = self._steps_left
        if repetition is None and run.warmups == 1 and took > self._estimate_after_s:
            self._progress.console.print(
                f"run {run_id}: the warm-up took {_duration(took)}; at that pace the job's "
                f"{steps_left} remaining step(s) take about {_duration(took * steps_left)}",
                highlight=False, soft_wrap=True,
            )
        shown = ""
        if values:
            first = values[0]
            shown = f"{first.metric.name.split('.', 1)[-1]}={first.value:.4g} {first.metric.unit}"
            if repetition is None:
                shown += " (warm-up)"
        self._progress.update(self._task, advance=1, last=shown)

    def run_finished(self, outcome: RunOutcome) -> None:
        with self._lock:
            run = self._runs.pop(outcome.run_id, None)
            unused = max(outcome.case.warmup + outcome.case.repeat - (run.steps if run else 0), 0)
            self._steps_left -= unused
        if outcome.status != RunStatus.COMPLETED:
            # A failed run will not take its remaining steps: keep the ETA honest.
            self._progress.update(self._task, advance=unused)
            self._progress.console.print(
                f"[red]run {outcome.run_id} {outcome.status}[/red]: {escape(outcome.error or '')}",
                highlight=False,
                soft_wrap=True,
            )

    def _beat(self) -> None:
        while not self._stopped.wait(self._heartbeat_s):
            now = time.monotonic()
            with self._lock:
                lines = [_heartbeat_line(run_id, run, now) for run_id, run in self._runs.items()
                         if run.step is not None]
            # Between steps (a set-up, a build, the next case) there is nothing to say.
            for line in lines:
                self._progress.console.print(escape(line), highlight=False, soft_wrap=True)


def _heartbeat_line(run_id: int, run: _Run, now: float) -> str:
    line = f"run {run_id} {run.case.benchmark}: {run.step}, {_duration(now - run.step_started)} into it"
    if run.expected_s is not None:
        source = "the warm-up" if run.warmups else "the last repetition"
        line += f" (expected {_duration(run.expected_s)}, as {source} took)"
    return f"{line}; the run started {_duration(now - run.started)} ago"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    hours, rest = divmod(round(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"
