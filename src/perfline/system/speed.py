"""Whether the machine runs at its usual speed: a guard around each bisection sample.

Shared VMs slow down by tens of percent for seconds at a time when their host is busy
(measured here: a CPU-time loop at 0.98 ms, then 1.37 ms for ~4 s with the guest idle).
A sample taken in such a spell moves the way a regression does, and a bisection that
believes it can stop on the wrong commit and even confirm it (docs/bisect.md, "Machines
whose speed changes"). The `pace` helper times a fixed loop in its own CPU time, which
other processes on the machine do not inflate; the guard reads it before and after a
sample and calls the sample unsteady when either reading is slower than the fastest
seen by more than the tolerance. Spells only ever slow the machine down, so the fastest
reading is the machine's own speed, and a reading taken during a spell at the start does
not become the yardstick.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from perfline.system.native import native_binary

# The pace loop's own spread is about 1% (473.6 µs ± 1% here, quiet or beside a CPU hog);
# the spells it is there for are +35% and more.
TOLERANCE = 0.10


def read_pace() -> int:
    """Nanoseconds of CPU time for the pace loop's fastest pass, now."""
    out = subprocess.run([str(native_binary("pace"))], capture_output=True, text=True, check=True).stdout
    return int(out.strip())


@dataclass
class PaceGuard:
    read: Callable[[], int] = read_pace
    tolerance: float = TOLERANCE
    fastest: int | None = field(default=None, init=False)

    def slowdown(self) -> float:
        """This reading's time over the fastest one so far, minus one (0.35: 35% slower)."""
        reading = self.read()
        self.fastest = reading if self.fastest is None else min(self.fastest, reading)
        return reading / self.fastest - 1.0

    def steady(self, slowdown: float) -> bool:
        return slowdown <= self.tolerance

    def settle(self, readings: int = 5, pause_s: float = 0.1) -> None:
        """Readings spread over a moment, so that the first sample is judged against the
        fastest of several rather than against one."""
        for _ in range(readings):
            self.slowdown()
            time.sleep(pause_s)
