"""What every monitor provides: system figures sampled beside each repetition."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from perfline.records.metric import Measurement, Metric
from perfline.records.profile import ProfileEntry


class MonitorUnavailable(RuntimeError):
    """The monitor cannot run on this system; the message says why and what to do."""


class Monitor(ABC):
    """Started just before a repetition and stopped just after it.

    `stop` returns rates or shares over exactly that interval, so warm-up and
    set-up work never leak into the figures.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    metrics: ClassVar[tuple[Metric, ...]]
    packages: ClassVar[tuple[str, ...]] = ()

    def check(self) -> None:
        """Raise MonitorUnavailable before the run starts if this system cannot support it."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> list[Measurement]: ...

    def close(self) -> None:
        """Release anything still running (after an interrupt). Must not raise."""


class ProfilingMonitor(Monitor):
    """A monitor that also samples where CPU time went; the runner stores the profile."""

    @abstractmethod
    def profile(self) -> list[ProfileEntry]:
        """The top symbols of the interval of the last `stop`, largest share first."""
