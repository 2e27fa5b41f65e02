"""The benchmark catalogue: one module per benchmark."""

from perfline.benchmarks.base import (
    Benchmark,
    BenchmarkFailed,
    BenchmarkUnavailable,
    Param,
    ParamValue,
)
from perfline.registry import Registry

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
)

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "BenchmarkFailed",
    "BenchmarkUnavailable",
    "Param",
    "ParamValue",
]
