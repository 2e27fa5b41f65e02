"""Any command as a benchmark: the last line of its stdout is the value.

The same contract as `perfline bisect --command`: a project's own benchmark script
becomes a perfline benchmark without a module of its own.
"""

from __future__ import annotations

import math
import os
import shlex
from pathlib import Path
from typing import ClassVar

from perfline.benchmarks.base import (
    BenchmarkFailed,
    CommandBenchmark,
    CommandOutput,
    Param,
)
from perfline.records.metric import Direction, Measurement, Metric


class Command(CommandBenchmark):
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

    def argv(self) -> list[str]:
        return ["/bin/sh", "-c", str(self.values["cmd"])]

    def timeout(self) -> float:
        return float(self.values["timeout"])

    def executables(self) -> list[Path]:
        """Programs the command names by path; a VM guest runs the rest with busybox.

        /bin/sh itself is the guest's busybox shell, so it is not among them.
        """
        words = shlex.split(str(self.values.get("cmd") or ""), comments=True)
        return [
            Path(word)
            for word in words
            if "/" in word and os.path.isfile(word) and os.access(word, os.X_OK)
        ]

    def failure(self, message: str, output_tail: str) -> BenchmarkFailed:
        return BenchmarkFailed(f"{self.values['cmd']}: {message}", output_tail)

    def parse(self, output: CommandOutput) -> list[Measurement]:
        if self.values["timing"]:
            return [Measurement(self.metric, output.elapsed_s)]
        return [Measurement(self.metric, parse_last_number(output.stdout, output.stderr))]

    @property
    def metric(self) -> Metric:
        timing = bool(self.values["timing"])
        return Metric(
            f"command.{self.values['metric']}",
            "s" if timing else str(self.values["unit"]),
            Direction(str(self.values["direction"])),
            f"{'wall time of' if timing else 'output of'} {self.values['cmd']}",
        )

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
