"""The monitor catalogue."""

from perfline.monitors.base import Monitor, MonitorFailed, MonitorUnavailable, ProfilingMonitor
from perfline.plugins import Registry

MONITORS: Registry[Monitor] = Registry(
    "monitor",
    {
        "proc-stat": "perfline.monitors.proc_stat:ProcStat",
        "vmstat": "perfline.monitors.vmstat:Vmstat",
        "perf-stat": "perfline.monitors.perf_stat:PerfStat",
        "perf-profile": "perfline.monitors.perf_profile:PerfProfile",
        "pace": "perfline.monitors.pace:Pace",
        "softirqs": "perfline.monitors.lkp:Softirqs",
        "interrupts": "perfline.monitors.lkp:Interrupts",
        "meminfo": "perfline.monitors.lkp:Meminfo",
        "psi": "perfline.monitors.lkp:Psi",
        "netdev": "perfline.monitors.lkp:Netdev",
        "diskstats": "perfline.monitors.lkp:Diskstats",
        "schedstat": "perfline.monitors.lkp:Schedstat",
        "cpufreq": "perfline.monitors.lkp:Cpufreq",
        "slabinfo": "perfline.monitors.lkp:Slabinfo",
        "numastat": "perfline.monitors.lkp:Numastat",
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
    "MonitorFailed",
    "MonitorUnavailable",
    "ProfilingMonitor",
]
