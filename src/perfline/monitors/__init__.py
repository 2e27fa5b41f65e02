"""The monitor catalogue."""

from perfline.monitors.base import Monitor, MonitorUnavailable
from perfline.registry import Registry

MONITORS: Registry[Monitor] = Registry(
    "monitor",
    {
        "proc-stat": "perfline.monitors.proc_stat:ProcStat",
        "vmstat": "perfline.monitors.vmstat:Vmstat",
        "perf-stat": "perfline.monitors.perf_stat:PerfStat",
    },
)

# Monitors a job gets when it names none: cheap, and what reviewers ask for first.
DEFAULT_MONITORS = ("proc-stat", "vmstat", "perf-stat")

__all__ = ["DEFAULT_MONITORS", "MONITORS", "Monitor", "MonitorUnavailable"]
