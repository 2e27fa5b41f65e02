"""The benchmark catalogue: one module per benchmark."""

from perfline.benchmarks.base import (
    Benchmark,
    BenchmarkFailed,
    BenchmarkUnavailable,
    Param,
)
from perfline.plugins import Registry

BENCHMARKS: Registry[Benchmark] = Registry(
    "benchmark",
    {
        "ftrace-switch": "perfline.benchmarks.ftrace_switch:FtraceSwitch",
        "ftrace-events": "perfline.benchmarks.ftrace_events:FtraceEvents",
        "rcu-gp": "perfline.benchmarks.rcu_gp:RcuGp",
        "sched-pipe": "perfline.benchmarks.perf_bench:SchedPipe",
        "hackbench": "perfline.benchmarks.perf_bench:Hackbench",
        "tbench": "perfline.benchmarks.tbench:Tbench",
        "cpu-latency": "perfline.benchmarks.cpu_latency:CpuLatency",
        "cyclictest": "perfline.benchmarks.cyclictest:Cyclictest",
        "migration-cost": "perfline.benchmarks.migration_cost:MigrationCost",
        "pgbench": "perfline.benchmarks.pgbench:Pgbench",
        "command": "perfline.benchmarks.command:Command",
    },
    group="perfline.benchmarks",
    base=Benchmark,
)


def rootfs_packages() -> tuple[str, ...]:
    """The Debian packages of every benchmark that needs a root file system in a VM:
    one image holds them all, so it is built once, not once per benchmark."""
    return tuple(sorted({p for b in BENCHMARKS.all() if b.needs_rootfs for p in b.packages}))


__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "BenchmarkFailed",
    "BenchmarkUnavailable",
    "Param",
    "rootfs_packages",
]
