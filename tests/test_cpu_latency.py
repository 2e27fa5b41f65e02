"""cpu-latency for real: the C helper pinned to every CPU this process may use."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from perfline.benchmarks import BENCHMARKS, BenchmarkUnavailable
from perfline.benchmarks.cpu_latency import MAX_GAP, CpuGap, CpuLatency, parse_output
from perfline.records.metric import Measurement
from perfline.system.native import CHECKOUT, NATIVE_DIR_ENV, native_binary
from perfline.system.process import ToolMissing

HELPER = CHECKOUT / "native" / "build" / "cpu_latency"


@pytest.fixture(scope="module", autouse=True)
def built_helper() -> None:
    # `make test` builds it first; a bare `pytest` run builds it here.
    if not HELPER.exists():
        subprocess.run(["make", "native"], cwd=CHECKOUT, check=True)


def measure(tmp_path: Path, **params: int | str) -> tuple[list[Measurement], dict[str, Any]]:
    try:
        with CpuLatency(params, tmp_path) as bench:
            return bench.run_once(), bench.settings()
    except BenchmarkUnavailable as exc:
        if "SCHED_FIFO" in str(exc) and os.geteuid() != 0:
            pytest.skip(f"this user may not use SCHED_FIFO: {exc}")
        raise


def test_registered() -> None:
    assert BENCHMARKS.get("cpu-latency") is CpuLatency
    assert CpuLatency.metrics == (MAX_GAP,)


def test_one_gap_per_cpu_and_the_worst(tmp_path: Path) -> None:
    measurements, settings = measure(tmp_path, duration_ms=200)
    cpus = sorted(os.sched_getaffinity(0))
    by_name = {m.metric.name: m for m in measurements}
    assert sorted(by_name) == sorted(
        [f"cpu-latency.cpu{cpu}.max_gap" for cpu in cpus] + ["cpu-latency.max_gap"]
    )
    assert all(m.value > 0 and m.metric.unit == "µs" for m in measurements)
    assert by_name["cpu-latency.max_gap"].value == max(
        by_name[f"cpu-latency.cpu{cpu}.max_gap"].value for cpu in cpus
    )
    assert settings["cpus"] == cpus


def test_chosen_cpu_only(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    measurements, _ = measure(tmp_path, duration_ms=50, cpus=str(cpu))
    names = [m.metric.name for m in measurements]
    assert names == [f"cpu-latency.cpu{cpu}.max_gap", "cpu-latency.max_gap"]


def test_cpu_outside_the_machine_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkUnavailable, match="outside this process's affinity"):
        CpuLatency({"cpus": "1023"}, tmp_path).setup()


def test_spin_longer_than_rt_budget_is_refused(tmp_path: Path) -> None:
    runtime_us = int(Path("/proc/sys/kernel/sched_rt_runtime_us").read_text())
    if runtime_us < 0:
        pytest.skip("RT throttling is off on this machine")
    with pytest.raises(BenchmarkUnavailable, match="RT budget"):
        CpuLatency({"duration_ms": runtime_us // 1000}, tmp_path).setup()


def test_missing_helper_says_make_native(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NATIVE_DIR_ENV, str(tmp_path))
    with pytest.raises(ToolMissing, match="make native"):
        native_binary("cpu_latency")
    with pytest.raises(BenchmarkUnavailable, match="make native"):
        CpuLatency({}, tmp_path).setup()


def test_parse_output() -> None:
    text = (
        "cpu=0 policy=fifo max_gap_ns=84235 samples=5486964 gaps_over_threshold=84\n"
        "cpu=3 policy=other max_gap_ns=71156 samples=5153632 gaps_over_threshold=78\n"
    )
    assert parse_output(text) == [CpuGap(0, 84235), CpuGap(3, 71156)]
    with pytest.raises(ValueError, match="no CPU lines"):
        parse_output("")
    with pytest.raises(ValueError, match="unexpected"):
        parse_output("cpu=0 max_gap_ns=lots\n")
