"""What tracing is active on this machine: a tracer, trace events, probes, perf events.

An enabled tracepoint costs every pass through it: with sched_switch on (and tracing_on
0) `perf bench sched pipe` took 4.40 us/op instead of 4.03 here. The fingerprint records
this state at the start of every run so that `compare` shows it; `system.disturbances`
turns it into the runner's warning and `perfline doctor`'s advice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from perfline.system.files import read_or_empty

TRACEFS = Path("/sys/kernel/tracing")
# Kernels before 4.1, or tracefs reached through debugfs.
DEBUGFS_TRACING = Path("/sys/kernel/debug/tracing")
PERF_EVENT_LINK = "anon_inode:[perf_event]"


@dataclass(frozen=True)
class TracingState:
    tracefs: str  # where it was read, or "" when no tracefs is mounted
    tracer: str = "nop"
    tracing_on: str = ""
    events: tuple[str, ...] = ()  # enabled trace events, `system:name` as set_event lists them
    kprobes: tuple[str, ...] = ()  # kprobe_events and uprobe_events definitions
    uprobes: tuple[str, ...] = ()
    # Other processes holding perf events: `comm[pid]` → how many.
    perf_events: dict[str, int] = field(default_factory=dict)

    def flat(self) -> dict[str, str]:
        """For the fingerprint: one comparable text per fact."""
        if not self.tracefs:
            return {"tracefs": "not mounted"}
        return {
            "current_tracer": self.tracer,
            "tracing_on": self.tracing_on,
            "enabled events": ",".join(self.events) or "none",
            "kprobes": ",".join(self.kprobes) or "none",
            "uprobes": ",".join(self.uprobes) or "none",
            # By command name, not pid: the same profiler in two runs is the same fact.
            "perf events of other processes": ",".join(
                f"{comm}:{count}" for comm, count in sorted(_by_comm(self.perf_events).items())
            ) or "none",
        }


def tracefs_dir() -> Path | None:
    """The mounted tracefs, without mounting it (reading must change nothing)."""
    for path in (TRACEFS, DEBUGFS_TRACING):
        if (path / "tracing_on").exists():
            return path
    return None


def read_tracing(ignore_pids: frozenset[int] = frozenset()) -> TracingState:
    """This machine's tracing now. `ignore_pids`: processes whose perf events are the
    caller's own (perfline and its monitors)."""
    perf = perf_event_holders(ignore_pids | {os.getpid()})
    root = tracefs_dir()
    if root is None:
        return TracingState(tracefs="", perf_events=perf)
    return TracingState(
        tracefs=str(root),
        tracer=read_or_empty(root / "current_tracer") or "nop",
        tracing_on=read_or_empty(root / "tracing_on"),
        events=tuple(_lines(root / "set_event")),
        kprobes=tuple(_probe_names(root / "kprobe_events")),
        uprobes=tuple(_probe_names(root / "uprobe_events")),
        perf_events=perf,
    )


def perf_event_holders(ignore: frozenset[int] | set[int]) -> dict[str, int]:
    """Processes with perf event file descriptors open, from /proc/*/fd (a readlink
    each: cheap next to a run; processes that exit meanwhile are skipped)."""
    holders: dict[str, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in ignore:
            continue
        try:
            count = sum(1 for fd in (proc / "fd").iterdir() if os.readlink(fd) == PERF_EVENT_LINK)
            if count:
                holders[f"{read_or_empty(proc / 'comm')}[{proc.name}]"] = count
        except OSError:
            continue
    return holders


def _by_comm(holders: dict[str, int]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for owner, count in holders.items():
        comm = owner.rpartition("[")[0]
        counts[comm] = counts.get(comm, 0) + count
    return counts


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in read_or_empty(path).splitlines() if line.strip()]


def _probe_names(path: Path) -> list[str]:
    """`p:kprobes/myprobe do_sys_open` → `kprobes/myprobe`."""
    return [line.split()[0].partition(":")[2] or line.split()[0] for line in _lines(path)]
