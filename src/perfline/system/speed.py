"""Whether the machine runs at its usual speed: a guard around each bisection sample.

Shared VMs slow down by tens of percent for seconds at a time when their host is busy
(measured here: a CPU-time loop at 0.98 ms, then 1.37 ms for ~4 s with the guest idle).
A sample taken in such a spell moves the way a regression does, and a bisection that
believes it can stop on the wrong commit and even confirm it (docs/bisect.md, "Machines
whose speed changes"). The `pace` helper times a fixed loop in its own CPU time, which
other processes on the machine do not inflate; the guard reads it before and after a
sample and calls the sample unsteady when either reading is slower than the machine's
recent pace by more than it allows.

The yardstick follows the machine: the median of the readings of the last two minutes
(at most the last 21). A spell of seconds stands out of it; a host that runs slower for
minutes, which on this VM happens daily (readings wandering between 480 and 800 µs for
minutes), becomes the pace within a minute instead of stopping every bisection against a
best reading the machine no longer reaches. What a reading may exceed the yardstick by
follows the machine too: the tolerance (10%), or three robust standard deviations of
the recent readings when they wander more than that, up to MAX_ALLOWED.
"""

from __future__ import annotations

import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median

from perfline.system.native import native_binary

# The pace loop's own spread is about 1% (473.6 µs ± 1% here, quiet or beside a CPU hog);
# the spells it is there for are +35% and more.
TOLERANCE = 0.10
# The yardstick's window: spells last 0.1-3 s, a slower host minutes. At most WINDOW_READINGS
# readings, so that a burst of quick samples does not stretch it over many minutes' worth.
WINDOW_S = 120.0
WINDOW_READINGS = 21
# Allowed slowdown: the tolerance or this many robust sd of the window's readings (the
# MAD times 1.4826), whichever is larger, but never more than MAX_ALLOWED: the spells of
# this VM are +35-58%, and a reading that much off is never steady.
SPREAD_SDS = 3.0
MAX_ALLOWED = 0.30
MAD_TO_SD = 1.4826
# How long a bisection retakes samples the machine ran slow for before it stops: only a
# machine unusable this long stops it (`bisect resume` continues).
PATIENCE_S = 600.0


def read_pace() -> int:
    """Nanoseconds of CPU time for the pace loop's fastest pass, now."""
    out = subprocess.run([str(native_binary("pace"))], capture_output=True, text=True, check=True).stdout
    return int(out.strip())


@dataclass
class PaceGuard:
    read: Callable[[], int] = read_pace
    tolerance: float = TOLERANCE
    patience_s: float = PATIENCE_S
    clock: Callable[[], float] = time.monotonic
    _readings: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=WINDOW_READINGS), init=False)

    def _recent(self) -> list[int]:
        now = self.clock()
        recent = [r for t, r in self._readings if now - t <= WINDOW_S]
        # After a long sample only the newest readings are in the window: keep three.
        return recent if len(recent) >= 3 else [r for _, r in list(self._readings)[-3:]]

    def reference(self) -> float:
        """The machine's recent pace: the median reading of the window (ns)."""
        return float(median(self._recent()))

    def allowed(self) -> float:
        """The slowdown a reading may show and still be steady, as the window says."""
        recent = self._recent()
        centre = median(recent)
        spread = MAD_TO_SD * median(abs(r - centre) for r in recent) / centre
        return min(max(self.tolerance, SPREAD_SDS * spread), max(self.tolerance, MAX_ALLOWED))

    def slowdown(self) -> float:
        """A new reading's time over the recent pace, minus one (0.35: 35% slower)."""
        reading = self.read()
        self._readings.append((self.clock(), reading))
        return reading / self.reference() - 1.0

    def steady(self, slowdown: float) -> bool:
        return slowdown <= self.allowed()

    def settle(self, readings: int = 5, pause_s: float = 0.1) -> None:
        """Readings spread over a moment, so that the first sample is judged against the
        median of several rather than against one."""
        for _ in range(readings):
            self.slowdown()
            time.sleep(pause_s)
