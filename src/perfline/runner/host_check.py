"""The runner's start-up check: `perfline doctor`'s list before a command's first run,
and tracing again before every run (a run before may have left an event on)."""

from __future__ import annotations

from perfline.system.disturbances import Disturbance, find, tracing
from perfline.system.kernel_state import KernelState
from perfline.system.tracing import read_tracing
from perfline.targets.local import pid_alive

TRACING_KINDS = ("tracing", "perf events")


class HostCheck:
    def __init__(self) -> None:
        self._steady: list[Disturbance] | None = None  # all but tracing, from the first run
        self._warned: set[Disturbance] = set()

    def before_run(self, kernel: KernelState) -> list[Disturbance]:
        """What disturbs the run about to start. Tracefs files this perfline journaled
        are its own doing (a benchmark's setup), not a disturbance."""
        own = frozenset(entry.path for entry in kernel.journal.entries)
        if self._steady is None:
            found = find(pid_alive, own)
            self._steady = [d for d in found if d.what not in TRACING_KINDS]
            return found
        return [*self._steady, *tracing(read_tracing(), own)]

    def new(self, found: list[Disturbance]) -> list[Disturbance]:
        """Those not warned about yet in this command: a matrix of 20 runs warns once."""
        fresh = [d for d in found if d not in self._warned]
        self._warned.update(fresh)
        return fresh
