"""sched-pipe and hackbench: parsers on captured perf 6.1 output, and real tiny runs."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from perfline.benchmarks import BENCHMARKS, BenchmarkUnavailable
from perfline.benchmarks.perf_bench import (
    Hackbench,
    PerfBench,
    SchedPipe,
    parse_pipe_rates,
    parse_total_seconds,
)
from perfline.records.metric import Measurement

# Captured from perf 6.1.192 on the 2-vCPU development VM.
PIPE_OUTPUT = """\
# Running 'sched/pipe' benchmark:
# Executed 2000 pipe operations between two processes

     Total time: 0.026 [sec]

      13.272500 usecs/op
          75343 ops/sec
"""
PIPE_THREADS_OUTPUT = """\
# Running 'sched/pipe' benchmark:
# Executed 2000 pipe operations between two threads

     Total time: 0.011 [sec]

       5.612500 usecs/op
         178173 ops/sec
"""
MESSAGING_OUTPUT = """\
# Running 'sched/messaging' benchmark:
# 20 sender and receiver processes per group
# 1 groups == 40 processes run

     Total time: 0.031 [sec]
"""


def run_once(
    cls: type[PerfBench], tmp_path: Path, **params: Any
) -> tuple[list[Measurement], dict[str, Any]]:
    with cls(params, tmp_path) as bench:
        return bench.run_once(), bench.settings()


def assert_measured(measurements: list[Measurement], names: list[str]) -> None:
    assert [m.metric.name for m in measurements] == names
    assert all(math.isfinite(m.value) and m.value > 0 for m in measurements)


def test_registered() -> None:
    assert BENCHMARKS.get("sched-pipe") is SchedPipe
    assert BENCHMARKS.get("hackbench") is Hackbench


def test_parse_pipe_rates() -> None:
    assert parse_pipe_rates(PIPE_OUTPUT) == (13.2725, 75343.0)
    assert parse_pipe_rates(PIPE_THREADS_OUTPUT) == (5.6125, 178173.0)


def test_parse_total_seconds() -> None:
    assert parse_total_seconds(MESSAGING_OUTPUT) == 0.031


def test_zero_total_time_is_an_error() -> None:
    with pytest.raises(ValueError, match="resolution"):
        parse_total_seconds(MESSAGING_OUTPUT.replace("0.031", "0.000"))


def test_missing_lines_are_errors() -> None:
    with pytest.raises(ValueError, match="usecs/op"):
        parse_pipe_rates(MESSAGING_OUTPUT)
    with pytest.raises(ValueError, match="Total time"):
        parse_total_seconds("perf: 'bench' is not a perf-command.\n")


def test_sched_pipe_pinned_by_default(tmp_path: Path) -> None:
    measurements, settings = run_once(SchedPipe, tmp_path, loops=2000)
    assert_measured(measurements, ["sched-pipe.usecs_per_op", "sched-pipe.ops_per_sec"])
    assert settings["cpus"] == "0"
    assert settings["perf"].startswith("perf version")


def test_sched_pipe_threads_unpinned(tmp_path: Path) -> None:
    measurements, settings = run_once(SchedPipe, tmp_path, loops=2000, threads=True, cpus="")
    assert_measured(measurements, ["sched-pipe.usecs_per_op", "sched-pipe.ops_per_sec"])
    assert settings["cpus"] == "all"


def test_hackbench(tmp_path: Path) -> None:
    measurements, settings = run_once(Hackbench, tmp_path, groups=1, loops=20)
    assert_measured(measurements, ["hackbench.seconds"])
    assert settings["cpus"] == "all"


def test_hackbench_threads_over_pipes_pinned(tmp_path: Path) -> None:
    cpu = str(min(os.sched_getaffinity(0)))
    measurements, settings = run_once(
        Hackbench, tmp_path, groups=1, loops=20, threads=True, pipe=True, cpus=cpu
    )
    assert_measured(measurements, ["hackbench.seconds"])
    assert settings["cpus"] == cpu


def test_cpu_list_this_machine_lacks_is_unavailable(tmp_path: Path) -> None:
    missing = str(max(os.sched_getaffinity(0)) + 4096)
    with pytest.raises(BenchmarkUnavailable, match="usable CPUs"):
        run_once(SchedPipe, tmp_path, loops=10, cpus=missing)
