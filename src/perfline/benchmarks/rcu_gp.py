"""rcu-gp: RCU grace-period latency, the quantity behind the seed's ftrace slowdown.

Runs native/rcu_gp, which times membarrier(MEMBARRIER_CMD_GLOBAL), a synchronize_rcu()
in the kernel; its header explains the method and when the kernel cannot do it. Unlike
ftrace-switch and ftrace-events it needs no tracefs, so it also runs under lockdown
and measures grace periods alone, without ftrace's own work around them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfline.benchmarks.base import (
    BenchmarkFailed,
    BenchmarkUnavailable,
    CommandBenchmark,
    CommandOutput,
    Param,
)
from perfline.records.metric import Direction, Measurement, Metric
from perfline.system.native import native_binary
from perfline.system.process import ToolMissing

# Knobs that decide what a "grace period" is here: expedited ones take microseconds, not
# jiffies, so a run with rcu_expedited=1 is not comparable with one without.
RCU_SETTINGS = {
    "rcu_expedited": Path("/sys/kernel/rcu_expedited"),
    "rcu_normal": Path("/sys/kernel/rcu_normal"),
}
# Normal grace periods take a few jiffies; a second each is far beyond even an idle,
# HZ=100 system, and RCU's own stall warning fires at 21 s.
TIMEOUT_PER_GP_S = 1.0
TIMEOUT_SLACK_S = 30.0

MS_PER_GP = Metric(
    "rcu-gp.ms_per_gp",
    "ms",
    Direction.LOWER,
    "mean wall time of membarrier(MEMBARRIER_CMD_GLOBAL), one synchronize_rcu() each",
)
MAX_MS = Metric(
    "rcu-gp.max_ms",
    "ms",
    Direction.LOWER,
    "longest membarrier(MEMBARRIER_CMD_GLOBAL) call of the repetition",
)


@dataclass(frozen=True)
class GracePeriods:
    calls: int
    mean_ns: int
    max_ns: int


def parse_output(text: str) -> GracePeriods:
    """The one `calls=N mean_ns=N median_ns=N min_ns=N max_ns=N` line of rcu_gp."""
    lines = text.strip().splitlines()
    if len(lines) != 1:
        raise ValueError(f"expected one line from rcu_gp, got {len(lines)}")
    fields = dict(field.partition("=")[::2] for field in lines[0].split())
    try:
        return GracePeriods(int(fields["calls"]), int(fields["mean_ns"]), int(fields["max_ns"]))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"unexpected rcu_gp line {lines[0]!r}") from exc


class RcuGp(CommandBenchmark):
    name = "rcu-gp"
    summary = "RCU grace-period latency: membarrier(MEMBARRIER_CMD_GLOBAL), a synchronize_rcu()"
    params = (Param("iterations", int, 50, "grace periods waited for per repetition", minimum=1),)
    metrics = (MS_PER_GP, MAX_MS)

    def setup(self) -> None:
        try:
            native_binary("rcu_gp")
        except ToolMissing as exc:
            raise BenchmarkUnavailable(str(exc)) from exc
        # One grace period shows a kernel without membarrier or MEMBARRIER_CMD_GLOBAL now,
        # not as a failure of every repetition.
        try:
            self.parse(self.run_here(_argv(1), _timeout(1)))
        except BenchmarkFailed as exc:
            raise BenchmarkUnavailable(f"{exc}\n{exc.output_tail}") from exc

    def argv(self) -> list[str]:
        return _argv(int(self.values["iterations"]))

    def timeout(self) -> float:
        return _timeout(int(self.values["iterations"]))

    def parse(self, output: CommandOutput) -> list[Measurement]:
        try:
            periods = parse_output(output.stdout)
        except ValueError as exc:
            raise BenchmarkFailed(f"rcu-gp: {exc}", output.stdout) from exc
        return [
            Measurement(MS_PER_GP, periods.mean_ns / 1e6),
            Measurement(MAX_MS, periods.max_ns / 1e6),
        ]

    def settings(self) -> dict[str, Any]:
        return {
            name: path.read_text().strip() if path.exists() else None
            for name, path in RCU_SETTINGS.items()
        }


def _argv(iterations: int) -> list[str]:
    return [str(native_binary("rcu_gp")), f"--iterations={iterations}"]


def _timeout(iterations: int) -> float:
    return iterations * TIMEOUT_PER_GP_S + TIMEOUT_SLACK_S
