"""Any command as a benchmark: the last line of its stdout is the value.

The same contract as `perfline bisect --command`: a project's own benchmark script
becomes a perfline benchmark without a module of its own.
"""

from __future__ import annotations

import math
import time
from typing import ClassVar

from perfline.benchmarks.base import Benchmark, BenchmarkFailed, Param
from perfline.metric import Direction, Measurement, Metric
from perfline.process import CommandFailed, run


class Command(Benchmark):
    name = "command"
    summary = "a shell command; the last line of its stdout is the value (or its wall time)"
    params = (
        Param("cmd", str, None, "shell command to run in the run's work directory"),
        Param("metric", str, "value", "metric name, reported as command.<metric>"),
        Param("unit", str, "", "unit of the value"),
        Param("direction", str, "lower", "which way is better", choices=("lower", "higher")),
        Param("timing", bool, False, "report the command's wall time in seconds instead"),
        Param("timeout", float, 3600.0, "seconds before the command is killed", minimum=0.001),
    )
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("command.value", "", Direction.LOWER, "the command's last stdout line"),
    )

    def setup(self) -> None:
        if not self.values.get("cmd"):
            raise BenchmarkFailed("the command benchmark needs a cmd param, e.g. -p cmd='./bench'")
        timing = bool(self.values["timing"])
        self.metric = Metric(
            f"command.{self.values['metric']}",
            "s" if timing else str(self.values["unit"]),
            Direction(str(self.values["direction"])),
            f"{'wall time of' if timing else 'output of'} {self.values['cmd']}",
        )

    def run_once(self) -> list[Measurement]:
        argv = ["/bin/sh", "-c", str(self.values["cmd"])]
        started = time.perf_counter()
        try:
            proc = run(argv, timeout=float(self.values["timeout"]), cwd=self.workdir)
        except CommandFailed as exc:
            raise BenchmarkFailed(f"{self.values['cmd']}: {exc}", exc.output_tail) from exc
        elapsed = time.perf_counter() - started
        if self.values["timing"]:
            return [Measurement(self.metric, elapsed)]
        return [Measurement(self.metric, parse_last_number(proc.stdout, proc.stderr))]

    def settings(self) -> dict[str, object]:
        return {"cmd": self.values.get("cmd")}


def parse_last_number(stdout: str, stderr: str = "") -> float:
    lines = stdout.strip().splitlines()
    last = lines[-1].strip() if lines else ""
    try:
        value = float(last)
    except ValueError:
        raise BenchmarkFailed(
            f"the last line of stdout must be a number, got {last!r}", stderr or stdout
        ) from None
    if not math.isfinite(value):
        raise BenchmarkFailed(f"the command printed a non-finite value {last!r}", stderr or stdout)
    return value
