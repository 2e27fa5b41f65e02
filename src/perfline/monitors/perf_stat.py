"""System-wide `perf stat` counts over the interval.

cycles and instructions (and their ratio, IPC) where the CPU exposes them; many VMs
do not, and then the software events, which every kernel with perf events has.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Mapping
from dataclasses import dataclass

from perfline.monitors.base import Monitor, MonitorUnavailable
from perfline.monitors.perf_tool import PerfSession, find_perf, system_wide_perf
from perfline.records.metric import Direction, Measurement, Metric
from perfline.system.process import CommandFailed, run

RATE = "/s"


@dataclass(frozen=True)
class Counted:
    """A perf event and the metric it becomes: per second if the unit is /s, else as counted."""

    event: str
    metric: Metric

    def value(self, count: float, seconds: float) -> float:
        return count / seconds if self.metric.unit == RATE else count


def _counted(event: str, unit: str, description: str) -> Counted:
    name = f"perf-stat.{event.replace('-', '_')}"
    return Counted(event, Metric(name, unit, Direction.NEUTRAL, description))


HARDWARE = (
    _counted("cycles", RATE, "CPU cycles, all CPUs"),
    _counted("instructions", RATE, "instructions retired, all CPUs"),
)
IPC = Metric("perf-stat.ipc", "instructions/cycle", Direction.NEUTRAL, "instructions per cycle")
# Without hardware counters, only events that fire rarely. task-clock and
# context-switches, counted system-wide, run perf code on every context switch: they
# made sched-pipe 3-5% slower (bench/monitor_overhead.py --each, 20 ABBA pairs, three
# repeats: +4.1% [+1.1, +7.2], +3.1% [+0.7, +5.6], +4.0% [+1.6, +6.4]); without them
# +0.5 to +0.7%, CI across 0. proc-stat already gives context switches/s for free, and
# system-wide task-clock is about the CPU count times the interval.
SOFTWARE = (
    _counted("cpu-migrations", RATE, "tasks moved between CPUs"),
    _counted("page-faults", RATE, "page faults"),
)


def parse_perf_csv(text: str) -> dict[str, float]:
    """Counts by event from `perf stat -x,` output; events perf could not count are left out."""
    counts: dict[str, float] = {}
    for row in csv.reader(line for line in text.splitlines() if not line.startswith("#")):
        if len(row) < 3:
            continue
        value, _unit, event = row[:3]
        try:
            counts[event] = float(value)
        except ValueError:  # <not supported>, <not counted>
            continue
    return counts


@functools.cache
def hardware_counters(perf: str) -> bool:
    """Whether this CPU counts cycles and instructions; probed once per process."""
    probe = run(
        [perf, "stat", "-x,", "-e", ",".join(c.event for c in HARDWARE), "true"], timeout=30
    )
    return "<not supported>" not in probe.stderr and "<not counted>" not in probe.stderr


class PerfStat(Monitor):
    name = "perf-stat"
    summary = "perf stat -a: cycles, instructions, IPC; or software events where those are absent"
    metrics = (*(c.metric for c in HARDWARE), IPC, *(c.metric for c in SOFTWARE))
    packages = ("linux-perf",)

    def __init__(self) -> None:
        self._session: PerfSession | None = None
        self._counted: tuple[Counted, ...] = ()
        self._started = 0.0

    def check(self) -> None:
        perf = system_wide_perf(self.name)
        try:
            hardware_counters(perf)
        except CommandFailed as exc:
            raise MonitorUnavailable(f"perf-stat: {exc}\n{exc.output_tail}") from exc

    def start(self) -> None:
        perf = find_perf(self.name)
        self.close()
        self._counted = HARDWARE if hardware_counters(perf) else SOFTWARE
        events = ",".join(c.event for c in self._counted)
        self._session = PerfSession(perf, "stat", ["-x,", "-e", events])
        try:
            self._started = self._session.command("enable")
        except BaseException:
            self.close()
            raise

    def stop(self) -> list[Measurement]:
        if self._session is None:
            raise RuntimeError("perf-stat: stop() without start()")
        try:
            seconds = self._session.command("disable") - self._started
            self._session.finish()
            counts = parse_perf_csv(self._session.output.read_text())
            measurements = [
                Measurement(c.metric, c.value(counts[c.event], seconds))
                for c in self._counted
                if c.event in counts
            ]
            return measurements + _ipc(counts)
        finally:
            self.close()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def _ipc(counts: Mapping[str, float]) -> list[Measurement]:
    cycles, instructions = counts.get("cycles"), counts.get("instructions")
    if not cycles or instructions is None:
        return []
    return [Measurement(IPC, instructions / cycles)]
