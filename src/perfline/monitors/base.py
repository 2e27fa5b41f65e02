"""What every monitor provides: system figures sampled beside each repetition."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from perfline.monitors.files import HOST, SystemFiles
from perfline.records.metric import Measurement, Metric
from perfline.records.profile import Profile


class MonitorUnavailable(RuntimeError):
    """The monitor cannot run on this system; the message says why and what to do."""


class MonitorFailed(RuntimeError):
    """The monitor's tool failed during a run; the message has its output. The run fails
    with it, as with a benchmark's failure: its repetitions so far are kept."""


class Monitor(ABC):
    """Started just before a repetition and stopped just after it.

    `stop` returns rates or shares over exactly that interval, so warm-up and
    set-up work never leak into the figures.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    metrics: ClassVar[tuple[Metric, ...]]
    packages: ClassVar[tuple[str, ...]] = ()
    # The files (shell patterns) the monitor reads, for a guest to read them in one look.
    sources: ClassVar[tuple[str, ...]] = ()
    # The files a monitor that measures the benchmark's own tasks reads in their cgroup
    # (names in it). For such a monitor the runner starts those tasks in a cgroup of
    # their own, on this host (`system.cgroup`) or in a VM's guest (`targets.guest`), and
    # before `check` names it in `tasks`, or leaves None there and says why in
    # `tasks_missing` (refused, no cgroup v2 or PSI).
    task_files: ClassVar[tuple[str, ...]] = ()
    tasks: Path | None = None
    tasks_missing: str = ""

    @classmethod
    def on(cls, files: SystemFiles) -> Monitor:
        """The monitor of the system whose files these are. One that measures this host
        by other means (perf's events) cannot see inside a VM and says so."""
        if files is not HOST:
            raise MonitorUnavailable(
                f"{cls.name}: measures this host, not {files.where}; the case runs without it"
            )
        return cls()

    def check(self) -> None:
        """Raise MonitorUnavailable before the run starts if this system cannot support it."""

    def gaps(self) -> list[str]:
        """After `check`: the parts of its figures this system cannot give, one line each;
        the rest is measured."""
        return []

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> list[Measurement]: ...

    def close(self) -> None:
        """Release anything still running (after an interrupt). Must not raise."""


class ProfilingMonitor(Monitor):
    """A monitor that also samples where CPU time went; the runner stores the profile."""

    @abstractmethod
    def profile(self) -> Profile:
        """The top symbols and call chains of the interval of the last `stop`."""
