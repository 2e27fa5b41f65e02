"""cyclictest for real (rt-tests), one-second runs, and the parsing of its JSON summary."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from perfline.benchmarks import BENCHMARKS, BenchmarkUnavailable
from perfline.benchmarks.cyclictest import (
    AVG_US,
    MAX_US,
    Cyclictest,
    ThreadLatency,
    measurements,
    parse_json,
)
from perfline.records.metric import Measurement

# Trimmed from `cyclictest --json` of rt-tests 2.40 on the development VM.
JSON: dict[str, Any] = {
    "file_version": 1,
    "num_threads": 2,
    "thread": {
        "0": {"histogram": {}, "cycles": 998, "min": 17, "max": 1668, "avg": 29.88, "cpu": 0},
        "1": {"histogram": {}, "cycles": 662, "min": 13, "max": 7460, "avg": 35.46, "cpu": 1},
    },
}


def by_name(found: list[Measurement]) -> dict[str, float]:
    return {m.metric.name: m.value for m in found}


def test_registered() -> None:
    assert BENCHMARKS.get("cyclictest") is Cyclictest
    assert Cyclictest.metrics == (MAX_US, AVG_US)


def test_one_thread_per_cpu_by_default(tmp_path: Path) -> None:
    with Cyclictest({"duration": 1}, tmp_path) as bench:
        values = by_name(bench.run_once())
        settings = bench.settings()
    cpus = sorted(os.sched_getaffinity(0))
    threads = range(len(cpus))
    assert sorted(values) == sorted(
        [f"cyclictest.t{t}.{stat}_us" for t in threads for stat in ("min", "avg", "max")]
        + ["cyclictest.max_us", "cyclictest.avg_us"]
    )
    assert all(value > 0 for value in values.values())
    for t in threads:
        low, avg, high = (values[f"cyclictest.t{t}.{stat}_us"] for stat in ("min", "avg", "max"))
        assert low <= avg <= high
    assert values["cyclictest.max_us"] == max(values[f"cyclictest.t{t}.max_us"] for t in threads)
    assert settings == {"cpus": cpus, "threads": len(cpus), "policy": "SCHED_FIFO"}


def test_thread_count(tmp_path: Path) -> None:
    with Cyclictest({"duration": 1, "threads": 1}, tmp_path) as bench:
        values = by_name(bench.run_once())
    assert sorted(values) == sorted(
        [
            "cyclictest.t0.min_us",
            "cyclictest.t0.avg_us",
            "cyclictest.t0.max_us",
            "cyclictest.max_us",
            "cyclictest.avg_us",
        ]
    )


def test_missing_cyclictest_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BenchmarkUnavailable, match="rt-tests"):
        Cyclictest({}, tmp_path).setup()


def test_parse_json_and_aggregates() -> None:
    threads = parse_json(json.dumps(JSON))
    assert threads == [
        ThreadLatency(0, 0, 998, 17.0, 29.88, 1668.0),
        ThreadLatency(1, 1, 662, 13.0, 35.46, 7460.0),
    ]
    values = by_name(measurements(threads))
    assert values["cyclictest.t1.max_us"] == 7460.0
    assert values["cyclictest.max_us"] == 7460.0
    assert values["cyclictest.avg_us"] == pytest.approx((29.88 + 35.46) / 2)


def test_parse_json_rejects_what_is_not_a_result() -> None:
    with pytest.raises(ValueError, match="unexpected"):
        parse_json("not json")
    with pytest.raises(ValueError, match="no threads"):
        parse_json(json.dumps({"thread": {}}))
    idle = {"thread": {"0": {**JSON["thread"]["0"], "cycles": 0}}}
    with pytest.raises(ValueError, match="no cycle"):
        parse_json(json.dumps(idle))
