"""How much slower than its recent pace the machine ran around each repetition (perfline.system.speed).

Shared VMs slow down by tens of percent for seconds at a time; a repetition caught in
such a spell is an outlier that no benchmark output explains. This monitor reads the
pace loop just before and just after each repetition and records the larger slowdown
against the median of the recent readings (the yardstick follows a machine whose speed
wanders; below 0 when it ran faster than that), so that `show` and `compare` put the
machine's own steadiness beside the numbers.
"""

from __future__ import annotations

import subprocess
from typing import ClassVar

from perfline.monitors.base import Monitor, MonitorUnavailable
from perfline.monitors.files import SystemFiles
from perfline.records.metric import Direction, Measurement, Metric
from perfline.system.process import ToolMissing
from perfline.system.speed import PaceGuard

SLOWDOWN = Metric("pace.slowdown", "%", Direction.NEUTRAL,
                  "the machine's speed around the repetition, against its recent median (below 0: faster)")


class Pace(Monitor):
    name = "pace"
    summary = "how much slower than its recent pace the machine ran around each repetition (shared VMs)"
    metrics: ClassVar[tuple[Metric, ...]] = (SLOWDOWN,)

    @classmethod
    def on(cls, files: SystemFiles) -> Monitor:
        # This host's pace, also for a case in a VM: an emulated guest runs exactly as
        # fast as the host lets it, so a slow spell here is one there.
        return cls()

    def __init__(self) -> None:
        self._guard = PaceGuard()
        self._before = 0.0

    def check(self) -> None:
        try:
            self._guard.settle()
        except (ToolMissing, OSError, subprocess.SubprocessError, ValueError) as exc:
            raise MonitorUnavailable(str(exc)) from exc

    def start(self) -> None:
        self._before = self._guard.slowdown()

    def stop(self) -> list[Measurement]:
        slower = max(self._before, self._guard.slowdown())
        return [Measurement(SLOWDOWN, 100.0 * slower)]
