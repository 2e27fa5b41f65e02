"""The monitor catalogue."""

from perfline.monitors.base import Monitor, MonitorUnavailable, ProfilingMonitor
from perfline.plugins import Registry

MONITORS: Registry[Monitor] = Registry(
    "monitor",
    {
        "proc-stat": "perfline.monitors.proc_stat:ProcStat",
        "vmstat": "perfline.monitors.vmstat:Vmstat",
        "perf-stat": "perfline.monitors.perf_stat:PerfStat",
        "perf-profile": "perfline.monitors.perf_profile:PerfProfile",
        "pace": "perfline.monitors.pace:Pace",
    },
    group="perfline.monitors",
    base=Monitor,
)

# Monitors a job gets when it names none: cheap, and what reviewers ask for first.
# perf-profile is not one: it samples every CPU 999 times a second and writes a file.
DEFAULT_MONITORS = ("proc-stat", "vmstat", "perf-stat")

__all__ = [
    "DEFAULT_MONITORS",
    "MONITORS",
    "Monitor",
    "MonitorUnavailable",
    "ProfilingMonitor",
]
