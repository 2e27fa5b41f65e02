"""Monitors that read cumulative kernel counters: a snapshot at start, the change at stop."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

from perfline.monitors.base import Monitor
from perfline.monitors.files import HOST, SystemFiles
from perfline.records.metric import Measurement, Metric

# (metric, counter name): the metric is the counter's change per second.
RateTable = tuple[tuple[Metric, str], ...]


@dataclass(frozen=True)
class Snapshot:
    taken: float  # SystemFiles.now()
    values: Mapping[str, int]


@dataclass(frozen=True)
class Interval:
    before: Snapshot
    after: Snapshot

    @property
    def seconds(self) -> float:
        return self.after.taken - self.before.taken

    def delta(self, counter: str) -> int:
        return self.after.values[counter] - self.before.values[counter]

    def rates(self, table: RateTable) -> list[Measurement]:
        return [
            Measurement(metric, self.delta(counter) / self.seconds) for metric, counter in table
        ]

    def present_rates(self, table: RateTable) -> list[Measurement]:
        """`rates` of the counters this kernel has: a row of /proc/softirqs or
        /proc/interrupts that an architecture or version lacks is left out, not an error."""
        return self.rates(tuple((m, c) for m, c in table if c in self.after.values and c in self.before.values))

    def present_shares_pct(self, table: RateTable) -> list[Measurement]:
        """Counters of microseconds (PSI's stall totals, CPU time) as their change in % of
        the interval's wall time; those this kernel lacks are left out, as in `present_rates`."""
        return [Measurement(m.metric, m.value / 1e4) for m in self.present_rates(table)]


class CounterMonitor(Monitor):
    """Subclasses say how to read their counters (from `self.files`, the kernel's files
    of the system under test) and what to make of an interval."""

    def __init__(self, files: SystemFiles = HOST) -> None:
        self.files = files
        self._before: Snapshot | None = None

    @classmethod
    def on(cls, files: SystemFiles) -> Monitor:
        return cls(files)

    @abstractmethod
    def read(self) -> dict[str, int]:
        """Current values by name: cumulative counters, and levels such as free memory."""

    @abstractmethod
    def measure(self, interval: Interval) -> list[Measurement]: ...

    def start(self) -> None:
        self._before = self._snapshot()

    def stop(self) -> list[Measurement]:
        if self._before is None:
            raise RuntimeError(f"{self.name}: stop() without start()")
        interval = Interval(self._before, self._snapshot())
        self._before = None
        return self.measure(interval)

    def _snapshot(self) -> Snapshot:
        return Snapshot(self.files.now(), self.read())
