"""cyclictest (rt-tests): wake-up latency of periodic SCHED_FIFO threads, per thread.

Each thread sleeps until an absolute time every `interval` µs and records how late it
woke. perfline reads cyclictest's --json summary, whose averages have two decimals where
the terminal summary rounds them to whole microseconds.

While it runs cyclictest holds /dev/cpu_dma_latency at 0 µs, keeping CPUs out of deep
idle states as latency measurements intend; the kernel drops that request when it
exits, so there is nothing to restore.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfline.benchmarks.base import (
    Benchmark,
    BenchmarkFailed,
    BenchmarkUnavailable,
    Param,
    ParamValue,
)
from perfline.records.metric import Direction, Measurement, Metric
from perfline.system.process import CommandFailed, ToolMissing, require_tool, run, tail

# Beyond the run itself: creating threads, mlockall, writing the JSON file.
TIMEOUT_SLACK_S = 30.0

MAX_US = Metric("cyclictest.max_us", "µs", Direction.LOWER, "largest wake-up latency, worst thread")
AVG_US = Metric(
    "cyclictest.avg_us", "µs", Direction.LOWER, "mean wake-up latency, averaged over threads"
)


def thread_metric(thread: int, stat: str) -> Metric:
    """cyclictest.t<N>.<stat>_us for stat min, avg or max; created as threads are measured."""
    return Metric(
        f"cyclictest.t{thread}.{stat}_us",
        "µs",
        Direction.LOWER,
        f"{stat} wake-up latency of cyclictest thread {thread}",
    )


@dataclass(frozen=True)
class ThreadLatency:
    thread: int
    cpu: int
    cycles: int
    min_us: float
    avg_us: float
    max_us: float


def parse_json(text: str) -> list[ThreadLatency]:
    """The per-thread results of `cyclictest --json=FILE` (rt-tests 2.x), in thread order."""
    try:
        threads = json.loads(text)["thread"]
        results = [
            ThreadLatency(
                int(number),
                int(t["cpu"]),
                int(t["cycles"]),
                float(t["min"]),
                float(t["avg"]),
                float(t["max"]),
            )
            for number, t in threads.items()
        ]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"unexpected cyclictest JSON: {exc!r}") from exc
    if not results:
        raise ValueError("cyclictest reported no threads")
    idle = [r.thread for r in results if r.cycles == 0]
    if idle:
        # min/avg/max of a thread that never woke are placeholders, not latencies.
        raise ValueError(f"cyclictest thread(s) {idle} completed no cycle")
    return sorted(results, key=lambda r: r.thread)


def measurements(threads: list[ThreadLatency]) -> list[Measurement]:
    per_thread = [
        Measurement(thread_metric(t.thread, stat), value)
        for t in threads
        for stat, value in (("min", t.min_us), ("avg", t.avg_us), ("max", t.max_us))
    ]
    return [
        *per_thread,
        Measurement(MAX_US, max(t.max_us for t in threads)),
        Measurement(AVG_US, sum(t.avg_us for t in threads) / len(threads)),
    ]


class Cyclictest(Benchmark):
    name = "cyclictest"
    summary = "rt-tests cyclictest: wake-up latency of periodic SCHED_FIFO threads, per thread"
    params = (
        Param("duration", int, 5, "seconds each repetition runs (cyclictest -D)", minimum=1),
        Param(
            "threads",
            int,
            None,
            "measuring threads (-t), pinned round-robin to the CPUs perfline may use; "
            "default one per such CPU",
            minimum=1,
        ),
        Param("priority", int, 80, "SCHED_FIFO priority of the threads, 1 to 99", minimum=1),
        Param("interval", int, 1000, "wake-up period of every thread in µs (-i)", minimum=1),
    )
    metrics = (MAX_US, AVG_US)
    packages = ("rt-tests",)

    def __init__(self, params: Mapping[str, ParamValue], workdir: Path) -> None:
        super().__init__(params, workdir)
        self._cyclictest = ""
        # The affinity mask, not the CPU count, so that taskset and cpusets are honoured.
        self._cpus = sorted(os.sched_getaffinity(0))
        self._threads = int(self.values.get("threads", len(self._cpus)))
        self._json = workdir / "cyclictest.json"

    def setup(self) -> None:
        try:
            self._cyclictest = require_tool("cyclictest", "rt-tests")
        except ToolMissing as exc:
            raise BenchmarkUnavailable(str(exc)) from exc
        # One cycle per thread shows a refused priority or mlockall before any repetition.
        try:
            run(self._argv("--loops=1"), timeout=TIMEOUT_SLACK_S)
        except CommandFailed as exc:
            raise BenchmarkUnavailable(f"{exc}\n{exc.output_tail}") from exc

    def run_once(self) -> list[Measurement]:
        duration = int(self.values["duration"])
        # A file left by an earlier run must not pass for this one's results.
        self._json.unlink(missing_ok=True)
        try:
            proc = run(self._argv(f"--duration={duration}"), timeout=duration + TIMEOUT_SLACK_S, cgroup=self.cgroup)
        except CommandFailed as exc:
            raise BenchmarkFailed(str(exc), exc.output_tail) from exc
        try:
            return measurements(parse_json(self._json.read_text()))
        except (OSError, ValueError) as exc:
            raise BenchmarkFailed(f"cyclictest: {exc}", tail(proc.stdout + proc.stderr)) from exc

    def settings(self) -> dict[str, Any]:
        return {"cpus": self._cpus, "threads": self._threads, "policy": "SCHED_FIFO"}

    def _argv(self, limit: str) -> list[str]:
        return [
            self._cyclictest,
            limit,
            "--mlockall",  # page faults in the measuring threads are not scheduling latency
            "--quiet",
            f"--threads={self._threads}",
            f"--affinity={','.join(map(str, self._cpus))}",
            f"--priority={self.values['priority']}",
            f"--interval={self.values['interval']}",
            # Every thread at `interval`: by default each one is 500 µs slower than the last.
            "--distance=0",
            f"--json={self._json}",
        ]
