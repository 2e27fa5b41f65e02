"""Per-CPU scheduling latency: the largest gap a SCHED_FIFO spinner sees on each CPU.

Runs native/cpu_latency, whose header explains the method and why runs stay short.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from perfline.benchmarks.base import (
    BenchmarkFailed,
    BenchmarkUnavailable,
    CommandBenchmark,
    CommandOutput,
    Param,
    ParamValue,
)
from perfline.records.metric import Direction, Measurement, Metric
from perfline.system.native import native_binary
from perfline.system.process import ToolMissing

T = TypeVar("T")
PROC_KERNEL = Path("/proc/sys/kernel")
# Beyond the spin itself: thread start-up while every CPU is busy with a spinner.
TIMEOUT_SLACK_S = 30.0

MAX_GAP = Metric(
    "cpu-latency.max_gap",
    "µs",
    Direction.LOWER,
    "largest gap between clock reads of a pinned SCHED_FIFO spinner, worst CPU",
)


def cpu_metric(cpu: int) -> Metric:
    """The per-CPU counterpart of MAX_GAP; created as CPUs are measured."""
    return Metric(
        f"cpu-latency.cpu{cpu}.max_gap",
        MAX_GAP.unit,
        MAX_GAP.direction,
        f"largest gap between clock reads of a pinned SCHED_FIFO spinner on CPU {cpu}",
    )


@dataclass(frozen=True)
class CpuGap:
    cpu: int
    max_gap_ns: int


def parse_output(text: str) -> list[CpuGap]:
    """The `cpu=N ... max_gap_ns=N ...` lines of cpu_latency, one per CPU."""
    gaps = []
    for line in text.splitlines():
        fields = dict(field.partition("=")[::2] for field in line.split())
        try:
            gaps.append(CpuGap(int(fields["cpu"]), int(fields["max_gap_ns"])))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"unexpected cpu_latency line {line!r}") from exc
    if not gaps:
        raise ValueError("cpu_latency printed no CPU lines")
    return gaps


@dataclass(frozen=True)
class RtBandwidth:
    """The kernel's RT throttling: RT tasks may run runtime_us of every period_us."""

    period_us: int
    runtime_us: int  # -1: not throttled

    @classmethod
    def read(cls) -> RtBandwidth:
        return cls(
            int((PROC_KERNEL / "sched_rt_period_us").read_text()),
            int((PROC_KERNEL / "sched_rt_runtime_us").read_text()),
        )

    def rest_s(self) -> float:
        """Pause between spins so no period holds more than runtime_us of them.

        Back-to-back spins can fill a period beyond its budget even when each one is
        shorter; the throttled remainder (50 ms by default) would then be reported as
        latency. Twice the unbudgeted part leaves a margin.
        """
        return 0.0 if self.runtime_us < 0 else 2 * (self.period_us - self.runtime_us) / 1e6


class CpuLatency(CommandBenchmark):
    name = "cpu-latency"
    summary = "largest gap between clock reads of a SCHED_FIFO spinner pinned to each CPU"
    params = (
        Param(
            "duration_ms",
            int,
            500,
            "spin time per CPU and repetition; must stay below sched_rt_runtime_us",
            minimum=1,
        ),
        Param("cpus", str, "all", "CPUs to measure, e.g. 0,2-3; all: every CPU perfline may use"),
        Param("priority", int, 1, "SCHED_FIFO priority of the spinners, 1 to 99", minimum=1),
    )
    metrics = (MAX_GAP,)

    def __init__(self, params: Mapping[str, ParamValue], workdir: Path) -> None:
        super().__init__(params, workdir)
        self._cpus: list[int] = []
        self._rt = RtBandwidth(0, -1)
        self._ready_at = 0.0

    def setup(self) -> None:
        try:
            native_binary("cpu_latency")
        except ToolMissing as exc:
            raise BenchmarkUnavailable(str(exc)) from exc
        self._rt = RtBandwidth.read()
        duration_us = int(self.values["duration_ms"]) * 1000
        if 0 <= self._rt.runtime_us <= duration_us:
            raise BenchmarkUnavailable(
                f"cpu-latency: duration_ms={self.values['duration_ms']} is not below the RT "
                f"budget of {self._rt.runtime_us // 1000} ms per period (sched_rt_runtime_us): "
                "every run would risk reporting RT throttling as latency"
            )
        # A 1 ms spin shows a refused SCHED_FIFO or a bad CPU list before any repetition.
        try:
            output = self._rested(lambda: self.run_here(self._argv(1), _timeout(1)))
            self._cpus = [gap.cpu for gap in self._gaps(output)]
        except BenchmarkFailed as exc:
            raise BenchmarkUnavailable(f"{exc}\n{exc.output_tail}") from exc

    def run_once(self) -> list[Measurement]:
        return self._rested(super().run_once)

    def argv(self) -> list[str]:
        return self._argv(int(self.values["duration_ms"]))

    def timeout(self) -> float:
        return _timeout(int(self.values["duration_ms"]))

    def parse(self, output: CommandOutput) -> list[Measurement]:
        gaps = self._gaps(output)
        per_cpu = [Measurement(cpu_metric(g.cpu), g.max_gap_ns / 1000) for g in gaps]
        return [*per_cpu, Measurement(MAX_GAP, max(m.value for m in per_cpu))]

    def settings(self) -> dict[str, Any]:
        return {
            "cpus": self._cpus,
            "policy": "SCHED_FIFO",
            "priority": self.values["priority"],
            "sched_rt_period_us": self._rt.period_us,
            "sched_rt_runtime_us": self._rt.runtime_us,
        }

    def _argv(self, duration_ms: int) -> list[str]:
        return [
            str(native_binary("cpu_latency")),
            f"--duration-ms={duration_ms}",
            f"--cpus={self.values['cpus']}",
            f"--priority={self.values['priority']}",
        ]

    def _rested(self, spin: Callable[[], T]) -> T:
        """Run a spin no sooner than the RT budget allows after the previous one."""
        time.sleep(max(0.0, self._ready_at - time.monotonic()))
        try:
            return spin()
        finally:
            self._ready_at = time.monotonic() + self._rt.rest_s()

    @staticmethod
    def _gaps(output: CommandOutput) -> list[CpuGap]:
        try:
            return parse_output(output.stdout)
        except ValueError as exc:
            raise BenchmarkFailed(f"cpu-latency: {exc}", output.stdout) from exc


def _timeout(duration_ms: int) -> float:
    return duration_ms / 1000 + TIMEOUT_SLACK_S
