"""A Rich progress bar with ETA, fed by the runner's observer callbacks."""

from __future__ import annotations

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


class ProgressObserver:
    """Draws on `console`, which should be stderr so that stdout carries only results."""

    def __init__(self, console: Console, cases: list[Case]) -> None:
        self._cases = cases
        self._console = console
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
        self._task = self._progress.add_task(
            "starting", total=sum(c.warmup + c.repeat for c in cases), last=""
        )
        self._steps_in_run = 0

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._progress.stop()

    def run_started(self, run_id: int, case: Case) -> None:
        index = self._cases.index(case) + 1
        label = f"run {run_id} {case.benchmark} {case.key}"
        if len(self._cases) > 1:
            label = f"[{index}/{len(self._cases)}] {label}"
        self._progress.update(self._task, description=label, last="")
        self._steps_in_run = 0

    def warning(self, message: str) -> None:
        self._progress.console.print(
            f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True
        )

    def step_done(self, run_id: int, repetition: int | None, values: list[Measurement]) -> None:
        shown = ""
        if values:
            first = values[0]
            shown = f"{first.metric.name.split('.', 1)[-1]}={first.value:.4g} {first.metric.unit}"
            if repetition is None:
                shown += " (warm-up)"
        self._progress.update(self._task, advance=1, last=shown)
        self._steps_in_run += 1

    def run_finished(self, outcome: RunOutcome) -> None:
        if outcome.status != RunStatus.COMPLETED:
            # A failed run will not take its remaining steps: keep the ETA honest.
            planned = outcome.case.warmup + outcome.case.repeat
            self._progress.update(self._task, advance=max(planned - self._steps_in_run, 0))
            self._progress.console.print(
                f"[red]run {outcome.run_id} {outcome.status}[/red]: {escape(outcome.error or '')}",
                highlight=False,
                soft_wrap=True,
            )
