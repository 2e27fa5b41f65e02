"""rcu-gp for real: the C helper waiting for RCU grace periods through membarrier."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from perfline.benchmarks import BENCHMARKS, BenchmarkUnavailable
from perfline.benchmarks.rcu_gp import (
    MAX_MS,
    MS_PER_GP,
    GracePeriods,
    RcuGp,
    parse_output,
)
from perfline.system.native import CHECKOUT, NATIVE_DIR_ENV

HELPER = CHECKOUT / "native" / "build" / "rcu_gp"


@pytest.fixture(scope="module", autouse=True)
def built_helper() -> None:
    # `make test` builds it first; a bare `pytest` run builds it here.
    if not HELPER.exists():
        subprocess.run(["make", "native"], cwd=CHECKOUT, check=True)


def test_registered() -> None:
    assert BENCHMARKS.get("rcu-gp") is RcuGp
    assert RcuGp.metrics == (MS_PER_GP, MAX_MS)


def test_measures_grace_periods(tmp_path: Path) -> None:
    with RcuGp({"iterations": 3}, tmp_path) as bench:
        measurements = bench.run_once()
        settings = bench.settings()
    by_name = {m.metric.name: m.value for m in measurements}
    assert sorted(by_name) == ["rcu-gp.max_ms", "rcu-gp.ms_per_gp"]
    assert 0 < by_name["rcu-gp.ms_per_gp"] <= by_name["rcu-gp.max_ms"]
    assert set(settings) == {"rcu_expedited", "rcu_normal"}


def test_helper_prints_one_parsable_line() -> None:
    proc = subprocess.run(
        [str(HELPER), "--iterations", "2"], capture_output=True, text=True, check=True
    )
    assert parse_output(proc.stdout).calls == 2
    assert "median_ns=" in proc.stdout and "min_ns=" in proc.stdout


@pytest.mark.parametrize("value", ["0", "-1", "x", "2x"])
def test_helper_rejects_bad_iterations(value: str) -> None:
    proc = subprocess.run([str(HELPER), f"--iterations={value}"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "--iterations" in proc.stderr


def test_missing_helper_says_make_native(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NATIVE_DIR_ENV, str(tmp_path))
    with pytest.raises(BenchmarkUnavailable, match="make native"):
        RcuGp({}, tmp_path).setup()


def test_parse_output() -> None:
    line = "calls=50 mean_ns=8532815 median_ns=8002642 min_ns=4033046 max_ns=16011514\n"
    assert parse_output(line) == GracePeriods(50, 8532815, 16011514)
    with pytest.raises(ValueError, match="one line"):
        parse_output(line + line)
    with pytest.raises(ValueError, match="unexpected"):
        parse_output("calls=50 mean_ns=lots\n")
