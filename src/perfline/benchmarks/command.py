"""Any command as a benchmark: the last line of its stdout is the value.

The same contract as `perfline bisect --command`: a project's own benchmark script
becomes a perfline benchmark without a module of its own. With `count`, the value is
instead what a counter counted while the command ran (`benchmarks.counting`).
"""

from __future__ import annotations

import math
import os
import platform
import shlex
import shutil
from pathlib import Path
from typing import Any, ClassVar

from perfline.benchmarks.base import (
    BenchmarkFailed,
    BenchmarkUnavailable,
    CommandBenchmark,
    CommandOutput,
    Param,
)
from perfline.benchmarks.counting import COUNTS, CYCLES_ESTIMATE, Counter, choose
from perfline.records.metric import Direction, Measurement, Metric
from perfline.system.process import ToolMissing


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
        Param("count", str, None, "count instead: instructions (perf's instructions:u where the CPU counts, "
              "else Valgrind), or cycles-estimate (Valgrind's cache simulation)", choices=COUNTS),
        Param("count_marker", bool, None, "with count: only between the program's CALLGRIND_START_INSTRUMENTATION "
              "and CALLGRIND_STOP_INSTRUMENTATION (callgrind --instr-atstart=no)"),
    )
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("command.value", "", Direction.LOWER, "the command's last stdout line"),
    )

    # The counter of a `count` run, chosen at set-up by what this machine has.
    counter: Counter | None = None

    def setup(self) -> None:
        if not self.values.get("cmd"):
            raise BenchmarkFailed("the command benchmark needs a cmd param, e.g. -p cmd='./bench'")
        if self.values.get("count"):
            try:
                self.counter = choose(str(self.values["count"]), bool(self.values.get("count_marker")))
            except ToolMissing as exc:
                raise BenchmarkUnavailable(str(exc)) from None

    def argv(self) -> list[str]:
        return ["/bin/sh", "-c", str(self.values["cmd"])]

    def guest_argv(self) -> list[str]:
        if self.values.get("count"):
            raise BenchmarkUnavailable("count: counts are taken on this host only (a guest has no Valgrind)")
        return self.argv()

    def run_once(self) -> list[Measurement]:
        if self.counter is None:
            return super().run_once()
        out = self.workdir / "counts"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        self.run_here(self.counter.argv(self.argv(), out), self.timeout())
        try:
            counts = self.counter.read(out)
        except (OSError, ValueError, KeyError) as exc:
            raise BenchmarkFailed(f"{self.values['cmd']}: the {self.counter.tool} counts could not be read: {exc}") \
                from None
        return [Measurement(metric, counts[key]) for key, metric in self.counted_metrics().items()]

    def counted_metrics(self) -> dict[str, Metric]:
        """The counts this run reports, each named for its counter: counts of two counters
        (or of the whole program and of its marked part) are never one series."""
        assert self.counter is not None
        tool, described = self.counter.tool, self.counter.describe(platform.processor() or platform.machine())
        found = {"instructions": Metric(f"command.instructions.{tool}", "instructions", Direction.LOWER, described)}
        if self.values.get("count") == CYCLES_ESTIMATE:
            found["cycles_estimate"] = Metric(
                f"command.cycles_estimate.{tool}", "est. cycles", Direction.LOWER,
                "L1 hits + 5 x LL hits + 35 x LL misses of Valgrind's cache simulation")
        return found

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

    def settings(self) -> dict[str, Any]:
        found: dict[str, Any] = {"cmd": self.values.get("cmd")}
        if self.counter is not None:
            found["counter"] = self.counter.tool + (" with cache simulation" if self.counter.cache_sim else "")
        return found


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
