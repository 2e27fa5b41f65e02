"""migration-cost for real: the C helper migrating between every pair of this machine's CPUs."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from perfline.benchmarks import BENCHMARKS, BenchmarkUnavailable
from perfline.benchmarks.migration_cost import (
    MAX_COST,
    MEAN_COST,
    MigrationCost,
    MigrationResult,
    format_matrix,
    parse_output,
    parse_size,
)
from perfline.system.native import CHECKOUT

HELPER = CHECKOUT / "native" / "build" / "migration_cost"
CPUS = sorted(os.sched_getaffinity(0))
TINY = {"size": "262144", "repeat": 3}

# Captured from `migration_cost --size 262144 --repeat 3` on a 2-CPU VM.
CAPTURED = """\
cache_size=262144 line_size=64 cpu_mhz=2596.128
src=0 dst=0 repeat=3 hot_median_ns=5338 hot_min_ns=4477 median_ns=5268 min_ns=4477 mad_ns=420 cost_ns=0 cost_mad_ns=170
src=0 dst=1 repeat=3 hot_median_ns=4496 hot_min_ns=4487 median_ns=26700 min_ns=16385 mad_ns=3114 cost_ns=22193 cost_mad_ns=3134
src=1 dst=0 repeat=3 hot_median_ns=5808 hot_min_ns=5428 median_ns=39459 min_ns=21782 mad_ns=801 cost_ns=33130 cost_mad_ns=1322
src=1 dst=1 repeat=3 hot_median_ns=4496 hot_min_ns=4496 median_ns=4477 min_ns=4427 mad_ns=20 cost_ns=-19 cost_mad_ns=20
"""

needs_two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="migrating needs two CPUs")


@pytest.fixture(scope="module", autouse=True)
def built_helper() -> None:
    # `make test` builds it first; a bare `pytest` run builds it here.
    if not HELPER.exists():
        subprocess.run(["make", "native"], cwd=CHECKOUT, check=True)


def test_registered() -> None:
    assert BENCHMARKS.get("migration-cost") is MigrationCost
    assert MigrationCost.metrics == (MAX_COST, MEAN_COST)


@needs_two_cpus
def test_every_ordered_pair_is_measured(tmp_path: Path) -> None:
    with MigrationCost(TINY, tmp_path) as bench:
        result = bench.measure()
        measurements = bench.run_once()
        settings = bench.settings()
    assert sorted((p.src, p.dst) for p in result.pairs) == [(s, d) for s in CPUS for d in CPUS]
    assert result.cache_size == 262144 and result.cache_level is None
    assert all(p.repeat == 3 and p.min_ns > 0 and p.hot_min_ns > 0 for p in result.pairs)
    by_name = {m.metric.name: m.value for m in measurements}
    pairs = [f"migration-cost.cpu{s}-cpu{d}.cost_us" for s in CPUS for d in CPUS if s != d]
    assert sorted(by_name) == sorted([*pairs, MAX_COST.name, MEAN_COST.name])
    assert all(math.isfinite(value) for value in by_name.values())
    assert by_name[MAX_COST.name] == max(by_name[name] for name in pairs)
    assert all(m.metric.unit == "µs" for m in measurements)
    assert settings["cpus"] == CPUS and settings["migrations_per_pair"] == 3


@needs_two_cpus
def test_auto_size_is_the_last_level_cache(tmp_path: Path) -> None:
    caches = []
    for index in Path(f"/sys/devices/system/cpu/cpu{CPUS[0]}/cache").glob("index*"):
        if (index / "type").read_text().strip() != "Instruction":
            caches.append((int((index / "level").read_text()), (index / "size").read_text()))
    if not caches:
        pytest.skip("sysfs lists no caches here")
    level, size = max(caches)
    with MigrationCost({"repeat": 1, "cpus": f"{CPUS[0]},{CPUS[1]}"}, tmp_path) as bench:
        result = bench.measure()
    assert result.cache_level == level
    assert result.cache_size == parse_size(size.strip() + "B")


def test_cpu_outside_the_machine_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkUnavailable, match="outside this process's affinity"):
        MigrationCost({**TINY, "cpus": "1023"}, tmp_path).setup()


def test_one_cpu_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkUnavailable, match="at least two CPUs"):
        MigrationCost({**TINY, "cpus": str(CPUS[0])}, tmp_path).setup()


def test_bad_size_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkUnavailable, match="expected auto or bytes"):
        MigrationCost({"size": "lots"}, tmp_path).setup()
    with pytest.raises(BenchmarkUnavailable, match="--size must be 4096"):
        MigrationCost({"size": "1K"}, tmp_path).setup()


def test_parse_size() -> None:
    assert parse_size("auto") is None
    assert parse_size("262144") == 262144
    assert parse_size("256K") == parse_size("256 KiB") == 262144
    assert parse_size("32m") == 32 << 20
    with pytest.raises(ValueError):
        parse_size("1.5M")


def test_parse_captured_output() -> None:
    result = parse_output(CAPTURED)
    assert (result.cache_size, result.cache_level, result.line_size) == (262144, None, 64)
    assert result.cpu_mhz == 2596.128
    assert result.cpus == [0, 1]
    assert [(p.src, p.dst, p.cost_ns) for p in result.cross_cpu()] == [(0, 1, 22193), (1, 0, 33130)]
    assert result.pairs[3].cost_ns == -19 and result.pairs[3].hot_min_ns == 4496


def test_parse_without_mhz_and_with_cache_level() -> None:
    header = "cache_size=33554432 cache_level=3 line_size=64\n"
    result = parse_output(header + CAPTURED.split("\n", 1)[1])
    assert (result.cache_level, result.cpu_mhz) == (3, None)


def test_parse_rejects_a_missing_pair_and_garbage() -> None:
    with pytest.raises(ValueError, match="every ordered pair"):
        parse_output(CAPTURED.rsplit("src=1 dst=1", 1)[0])
    with pytest.raises(ValueError, match="unexpected migration_cost line"):
        parse_output(CAPTURED + "src=2 dst=oops\n")
    with pytest.raises(ValueError, match="printed nothing"):
        parse_output("")


def test_matrix_like_the_seed() -> None:
    assert format_matrix(parse_output(CAPTURED)) == (
        "---------------------\n"
        "migration cost matrix (cache_size: 256 KB, cpu: 2596 MHz):\n"
        "---------------------\n"
        "           [00]      [01]\n"
        "[00]:  0.0(0.2) 22.2(3.1)\n"
        "[01]: 33.1(1.3)  0.0(0.0)\n"
        "---------------------\n"
        "cost(MAD) in µs, 3 migration(s) per pair: "
        "first touch after migrating minus the next one\n"
        "the diagonal migrates nowhere: its spread is the noise floor\n"
        "max 33.1 µs, mean 27.7 µs over 2 CPU pairs\n"
        "---------------------"
    )


def test_matrix_of_many_cpus_keeps_columns_aligned() -> None:
    diagonal = parse_output(CAPTURED).pairs[0]
    pairs = tuple(
        replace(diagonal, src=s, dst=d, cost_ns=1234567 * (s != d))
        for s in (0, 100)
        for d in (0, 100)
    )
    many = MigrationResult(
        cache_size=262145, cache_level=None, line_size=64, cpu_mhz=None, pairs=pairs
    )
    lines = format_matrix(many).splitlines()
    assert lines[1] == "migration cost matrix (cache_size: 262145 bytes, cpu: unknown):"
    assert lines[3:6] == [
        "             [000]       [100]",
        "[000]:    0.0(0.2) 1234.6(0.2)",
        "[100]: 1234.6(0.2)    0.0(0.2)",
    ]


@needs_two_cpus
def test_command_prints_the_matrix() -> None:
    argv = [sys.executable, "-m", "perfline", "migration-cost", "--size", "262144", "--repeat", "3"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("migration cost matrix (cache_size: 256 KB, cpu: ")
    assert [line[: line.index(":") + 1] for line in lines[4 : 4 + len(CPUS)]] == [
        f"[{cpu:02d}]:" for cpu in CPUS
    ]

    proc = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["cache_size"] == 262144
    assert len(document["pairs"]) == len(CPUS) ** 2


def test_command_reports_a_bad_cpu_list() -> None:
    argv = [sys.executable, "-m", "perfline", "migration-cost", "--cpus", "1023"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "outside this process's affinity" in proc.stderr
