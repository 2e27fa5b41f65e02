"""Scheduler benchmarks from `perf bench sched`: sched-pipe and hackbench (messaging).

Both parse perf's default output rather than `-f simple`: for `sched pipe` the simple
format prints only the total time to the millisecond, while the default format also
prints usecs/op with microsecond precision.
"""

from __future__ import annotations

import os
import re
from abc import abstractmethod
from typing import Any, ClassVar

from perfline.benchmarks.base import (
    BenchmarkFailed,
    BenchmarkUnavailable,
    CommandBenchmark,
    CommandOutput,
    GuestSetup,
    Param,
)
from perfline.records.metric import Direction, Measurement, Metric
from perfline.system.process import ToolMissing, require_tool, tail

_TOTAL_TIME = re.compile(r"^\s*Total time:\s*([0-9.]+) \[sec\]\s*$", re.MULTILINE)
_USECS_PER_OP = re.compile(r"^\s*([0-9.]+) usecs/op\s*$", re.MULTILINE)
_OPS_PER_SEC = re.compile(r"^\s*([0-9.]+) ops/sec\s*$", re.MULTILINE)
PROBE_TIMEOUT_S = 60.0
# `sh -c PROBE NAME PERF [TASKSET -c CPUS]`: prints the perf binary to run, then its
# version, run under the taskset. Debian's /usr/bin/perf used to be (and is, where
# linux-base's wrapper is installed) a script that execs perf_<major.minor of the
# running kernel>, which a kernel of another version, such as a VM guest's, lacks:
# the probe takes that binary when present, else the newest perf_*, else perf itself.
PROBE = r"""
perf=$(command -v "$1") || { echo "$1 not found: install linux-perf" >&2; exit 127; }
shift
for candidate in "${perf}_$(uname -r | cut -d. -f1,2)" $(ls -v "$perf"_[0-9]* 2>/dev/null | tail -n 1); do
    if [ -x "$candidate" ]; then perf=$candidate; break; fi
done
echo "$perf"
exec "$@" "$perf" --version
"""


def _number(pattern: re.Pattern[str], output: str, what: str) -> float:
    found = pattern.search(output)
    if found is None:
        raise ValueError(f"no {what!r} line in perf bench output")
    return float(found.group(1))


def parse_total_seconds(output: str) -> float:
    """The 'Total time: X [sec]' of `perf bench sched messaging` (default format)."""
    seconds = _number(_TOTAL_TIME, output, "Total time")
    if seconds <= 0:
        # perf prints milliseconds; a zero means the run was too short to time at all.
        raise ValueError("total time is below perf's 1 ms resolution; raise loops or groups")
    return seconds


def parse_pipe_rates(output: str) -> tuple[float, float]:
    """(usecs/op, ops/sec) from `perf bench sched pipe` (default format)."""
    return (
        _number(_USECS_PER_OP, output, "usecs/op"),
        _number(_OPS_PER_SEC, output, "ops/sec"),
    )


def _cpus_param(default: str, why: str) -> Param:
    return Param(
        "cpus",
        str,
        default,
        "CPU list for `taskset -c` (e.g. '0' or '0,1'); every task of the benchmark may "
        f"run on any CPU of the list, perf 6.1 cannot pin each task separately. {why}",
    )


def _threads_param(what: str) -> Param:
    return Param("threads", bool, False, f"run the {what} as threads of one process (-T/-t)")


class PerfBench(CommandBenchmark):
    """One `perf bench sched` suite, optionally under taskset; subclasses give args and parsing."""

    suite: ClassVar[str]
    packages = ("linux-perf", "util-linux")
    # The guest's own perf: a host binary in an initramfs would lack its libraries' data.
    needs_rootfs = True

    _perf: str
    _perf_version: str
    _taskset = "taskset"  # the guest's, found on its PATH; set up here, this host's

    def setup(self) -> None:
        try:
            perf = require_tool("perf", "linux-perf")
            if self._cpus:
                self._taskset = require_tool("taskset", "util-linux")
        except ToolMissing as exc:
            raise BenchmarkUnavailable(str(exc)) from exc
        # Asking perf its version under the same taskset rejects a CPU list this machine
        # lacks (or a perf that does not match the kernel) now, not once per repetition.
        try:
            output = self.run_here(self._probe(perf), PROBE_TIMEOUT_S)
        except BenchmarkFailed as exc:
            usable = ",".join(map(str, sorted(os.sched_getaffinity(0))))
            raise BenchmarkUnavailable(
                f"cannot run perf with cpus {self._cpus or 'all'!r} (usable CPUs: {usable}): "
                f"{exc.output_tail}"
            ) from exc
        self.guest_ready(output)

    def guest_setup(self) -> GuestSetup:
        return GuestSetup(self._probe("perf"), PROBE_TIMEOUT_S)

    def guest_ready(self, output: CommandOutput) -> None:
        perf, _, version = output.stdout.partition("\n")
        self._perf, self._perf_version = perf.strip(), version.strip()

    def _probe(self, perf: str) -> list[str]:
        return ["sh", "-c", PROBE, "perf-probe", perf, *self._prefix]

    @property
    def _cpus(self) -> str:
        return str(self.values["cpus"]).strip()

    @property
    def _prefix(self) -> list[str]:
        return [self._taskset, "-c", self._cpus] if self._cpus else []

    def argv(self) -> list[str]:
        return [*self._prefix, self._perf, "bench", "sched", self.suite, *self.suite_args()]

    def parse(self, output: CommandOutput) -> list[Measurement]:
        try:
            return self.measurements(output.stdout)
        except ValueError as exc:
            raise BenchmarkFailed(f"{self.name}: {exc}", tail(output.stdout + output.stderr)) from exc

    def settings(self) -> dict[str, Any]:
        return {"cpus": self._cpus or "all", "perf": self._perf_version}

    def guest_settings(self) -> dict[str, Any]:
        return self.settings()

    @abstractmethod
    def suite_args(self) -> list[str]:
        """Options after `perf bench sched <suite>`."""

    @abstractmethod
    def measurements(self, output: str) -> list[Measurement]:
        """Parse perf's stdout; raise ValueError when it is not as expected."""


class SchedPipe(PerfBench):
    name = "sched-pipe"
    summary = "round trips between two tasks over a pair of pipes (wakeup + context switch cost)"
    suite = "pipe"
    params = (
        Param("loops", int, 100000, "pipe round trips per repetition", minimum=1),
        _threads_param("two tasks"),
        _cpus_param(
            "0",
            "The default, one CPU, measures the context-switch path and is stable; with "
            "several CPUs the scheduler decides whether the tasks share a CPU, and results "
            "swing between two modes (5 vs 45 usecs/op on a 2-vCPU VM). '' means no pinning.",
        ),
    )
    metrics = (
        Metric("sched-pipe.usecs_per_op", "usecs/op", Direction.LOWER, "time per pipe round trip"),
        Metric("sched-pipe.ops_per_sec", "ops/s", Direction.HIGHER, "pipe round trips per second"),
    )

    def suite_args(self) -> list[str]:
        args = ["-l", str(self.values["loops"])]
        if self.values["threads"]:
            args.append("-T")
        return args

    def measurements(self, output: str) -> list[Measurement]:
        usecs_per_op, ops_per_sec = parse_pipe_rates(output)
        per_op, per_sec = self.metrics
        return [Measurement(per_op, usecs_per_op), Measurement(per_sec, ops_per_sec)]


class Hackbench(PerfBench):
    name = "hackbench"
    summary = "time for groups of senders and receivers to exchange messages (scheduler load)"
    suite = "messaging"
    params = (
        Param("groups", int, 10, "groups of 20 senders and 20 receivers", minimum=1),
        Param("loops", int, 100, "messages each sender sends to each receiver", minimum=1),
        _threads_param("senders and receivers"),
        Param("pipe", bool, False, "use pipe() instead of socketpair() (-p)"),
        _cpus_param("", "Default '': all CPUs, as hackbench is meant to load them all."),
    )
    metrics = (
        Metric("hackbench.seconds", "s", Direction.LOWER, "total time of the message exchange"),
    )

    def suite_args(self) -> list[str]:
        args = ["-g", str(self.values["groups"]), "-l", str(self.values["loops"])]
        if self.values["threads"]:
            args.append("-t")
        if self.values["pipe"]:
            args.append("-p")
        return args

    def measurements(self, output: str) -> list[Measurement]:
        (seconds,) = self.metrics
        return [Measurement(seconds, parse_total_seconds(output))]
