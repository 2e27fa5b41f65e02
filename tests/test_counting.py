"""Counting instead of timing: the command benchmark's `count`, with the counter this
machine has (perf's instructions:u where the CPU counts, else Valgrind), and the
statistics of a metric whose noise is measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from perfline.benchmarks.command import Command
from perfline.benchmarks.counting import cycles_estimate, perf_counts_instructions, perf_instructions, valgrind_totals
from perfline.records.job import ParamValue
from perfline.records.metric import Direction, Metric
from perfline.stats.counted import compare_counted, counted_floor, history_noise, noise_pct
from perfline.stats.sequential import SequentialPlan
from perfline.stats.two_sample import INCONCLUSIVE, NO_CHANGE, REGRESSION

pytestmark = pytest.mark.skipif(not Path("/usr/bin/valgrind").exists(), reason="valgrind: make install-deps")

PROGRAM = r"""
#include <stdio.h>
#include <valgrind/callgrind.h>
int main(void)
{
	volatile unsigned long sink = 0;
	for (unsigned long i = 0; i < 200000; i++)  /* set-up, outside the markers */
		sink += i;
	CALLGRIND_START_INSTRUMENTATION;
	for (unsigned long i = 0; i < LOOPS; i++)
		sink += i * i;
	CALLGRIND_STOP_INSTRUMENTATION;
	printf("%lu\n", sink);
	return 0;
}
"""
COUNT = Metric("command.instructions.cachegrind", "instructions", Direction.LOWER)


def build(directory: Path, loops: int) -> Path:
    source = directory / f"loop{loops}.c"
    source.write_text(PROGRAM)
    binary = directory / f"loop{loops}"
    subprocess.run(["cc", "-O1", f"-DLOOPS={loops}UL", "-o", str(binary), str(source)], check=True)
    return binary


def perfline(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFLINE_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), *args],
                          capture_output=True, text=True, timeout=600, env=env, check=False)


def counted_run(tmp_path: Path, program: Path, *params: str, repeat: int = 3) -> dict:
    proc = perfline(tmp_path, "run", "command", "-p", f"cmd={program}", *(f"-p{p}" for p in params),
                    "--repeat", str(repeat), "--warmup", "0", "--no-monitors", "--json")
    assert proc.returncode == 0, proc.stderr
    [run] = json.loads(proc.stdout)
    return run


def samples(run: dict) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for sample in run["samples"]:
        found.setdefault(sample["metric"], []).append(sample["value"])
    return found


def measured(program: Path, **params: ParamValue) -> dict[str, list[float]]:
    """Two repetitions of the command benchmark in this process (no perfline start-up)."""
    with tempfile.TemporaryDirectory() as workdir, Command({"cmd": str(program), **params}, Path(workdir)) as bench:
        found: dict[str, list[float]] = {}
        for _ in range(2):
            for measurement in bench.run_once():
                found.setdefault(measurement.metric.name, []).append(measurement.value)
        assert bench.settings()["counter"]
        return found


def test_the_markers_count_only_the_measured_part(tmp_path: Path) -> None:
    small, large = (measured(build(tmp_path, n), count="instructions", count_marker=True)
                    ["command.instructions.callgrind"] for n in (100000, 300000))
    # The marked loop alone: 200,000 more iterations make the whole difference, and the
    # set-up loop and the C library's start-up stay out.
    per_iteration = (large[0] - small[0]) / 200000
    assert 3 <= per_iteration <= 8 and small == [small[0]] * 2
    assert small[0] < 1.05 * per_iteration * 100000


def test_a_cycles_estimate_comes_with_its_instructions(tmp_path: Path) -> None:
    found = measured(build(tmp_path, 300000), count="cycles-estimate")
    instructions, cycles = found["command.instructions.cachegrind"], found["command.cycles_estimate.cachegrind"]
    # Every instruction fetch and data access costs at least one cycle.
    assert cycles[0] > instructions[0] and max(cycles) - min(cycles) <= 1e-4 * cycles[0]


def test_perf_stat_output_is_read_or_refused() -> None:
    # `perf stat -x ,` on a CPU that counts, and on this VM, which has no PMU.
    assert perf_instructions("# started on ...\n\n1234567,,instructions:u,804320,100.00,,\n") == 1234567
    with pytest.raises(ValueError):
        perf_instructions("<not supported>,,instructions:u,0,100.00,,\n")


def test_the_cycles_formula() -> None:
    text = "events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\nsummary: 1000 10 2 300 30 5 200 20 3\n"
    events = valgrind_totals(text)
    # accesses 1500, L1 misses 60, LL misses 10: 1440 + 5 * 50 + 35 * 10
    assert cycles_estimate(events) == 1440 + 250 + 350
    assert valgrind_totals("events: Ir Dr\ntotals: 7\n") == {"Ir": 7.0, "Dr": 0.0}


def test_one_run_a_side_decides_a_small_step_and_equal_counts_are_no_change(tmp_path: Path) -> None:
    base = build(tmp_path, 1000000)
    first = counted_run(tmp_path, base, "count=instructions", repeat=2)
    counted_run(tmp_path, build(tmp_path, 1004000), "count=instructions", repeat=2)  # +0.4% of the loop
    counted_run(tmp_path, base, "count=instructions", repeat=2)
    # The count repeats, and names the counter this machine has.
    tool = "perf" if perf_counts_instructions() else "cachegrind"
    [(metric, values)] = samples(first).items()
    assert metric == f"command.instructions.{tool}" and first["settings"]["counter"] == tool
    assert values[0] > 4 * 1000000 and max(values) - min(values) <= 1e-4 * min(values)
    step = perfline(tmp_path, "compare", "1", "2", "--json")
    same = perfline(tmp_path, "compare", "1", "3", "--json")
    [row] = json.loads(step.stdout)["cases"][0]["metrics"]
    [judged] = row["others"]
    assert judged["verdict"] == REGRESSION and 0.2 < judged["change_pct"] < 0.5, judged
    assert judged["floor_pct"] == counted_floor(1.0)
    [row] = json.loads(same.stdout)["cases"][0]["metrics"]
    assert row["others"][0]["verdict"] == NO_CHANGE


def test_a_counts_noise_is_measured_not_assumed() -> None:
    rng = np.random.default_rng(28)
    exact = compare_counted([1e8], [1.003e8], COUNT, floor_pct=0.1, history_noise_pct=0.0)
    assert exact.verdict == REGRESSION and exact.ci_pct == pytest.approx((0.3, 0.3))
    # Without a measured noise (one value a side, no history) nothing is assumed: the
    # timed comparison's rule, which cannot decide from one value.
    assert compare_counted([1e8], [1.003e8], COUNT, floor_pct=0.1).verdict == INCONCLUSIVE
    # Counts with 1% noise (a counter that also sees other work), the same level on both
    # sides, three values a side: false regressions at most alpha/2 (0.5%) in 500 draws
    # (a z test on that noise, of 4 degrees of freedom, made 19 of 500: 3.8%).
    false = sum(
        compare_counted(1e8 * np.exp(rng.normal(0, 0.01, 3)), 1e8 * np.exp(rng.normal(0, 0.01, 3)), COUNT,
                        floor_pct=0.1).verdict == REGRESSION for _ in range(500))
    assert false <= 8
    assert noise_pct([np.array([100.0, 100.0]), np.array([7.0])]) == 0.0
    assert noise_pct([np.array([5.0])]) is None


def test_the_history_noise_is_not_moved_by_a_few_real_steps() -> None:
    flat = [1e8] * 4 + [1.005e8] * 4 + [1.010e8] * 2
    assert history_noise(flat) == 0.0
    rng = np.random.default_rng(1)
    noisy = 1e8 * np.exp(rng.normal(0, 0.002, 200))
    assert 0.15 < history_noise(list(noisy)) < 0.25  # the sd, 0.2%
    assert history_noise([1.0, 1.0, 1.0]) is None


def test_a_sequential_ab_of_counts_decides_at_two_pairs() -> None:
    plan = SequentialPlan.up_to(20, 0.01)
    assert not plan.done([1e8], [1.005e8], COUNT, 1.0)
    assert plan.done([1e8] * 2, [1.005e8] * 2, COUNT, 1.0)
    assert plan.judge([1e8] * 2, [1.005e8] * 2, COUNT, 1.0).verdict == REGRESSION
    timed = Metric("command.value", "s", Direction.LOWER)
    assert not plan.done([1.0, 1.01], [1.1, 1.11], timed, 1.0)


def test_a_tracker_job_on_counts_may_run_once_a_commit(tmp_path: Path) -> None:
    from perfline.records.job import JobError
    from perfline.track.tracker_file import load_tracker

    subprocess.run(["git", "init", "-q", str(tmp_path / "src")], check=True)
    text = (Path(__file__).resolve().parents[1] / "examples" / "track" / "counts.yaml").read_text()
    (tmp_path / "counts.yaml").write_text(text)
    spec = load_tracker(tmp_path / "counts.yaml")
    [job] = spec.jobs
    assert job.spec.repeat == 1 and job.spec.params["count"] == "instructions" and spec.number == "counted"
    (tmp_path / "bad.yaml").write_text(text.replace("number: counted", "number: counts"))
    with pytest.raises(JobError, match=r"bad.yaml:\d+: number must be one of all, counted, timed"):
        load_tracker(tmp_path / "bad.yaml")
    # A timed job still needs its five repetitions a commit.
    (tmp_path / "timed.yaml").write_text(text.replace("      count: instructions", "      timing: true"))
    with pytest.raises(JobError, match=r"timed.yaml:\d+: repeat 1: .* set repeat: 5"):
        load_tracker(tmp_path / "timed.yaml")


def test_a_trackers_confirmation_of_counts_ends_at_its_two_pair_look(tmp_path: Path) -> None:
    """A count has a look of its own at 2 pairs (stats.sequential.looks_of): a tracker's
    confirmation of a counted step ends there, in one attempt, not left `new` as if the
    day's budget had cut it between looks."""
    import io

    from rich.console import Console

    from perfline.analysis import regressions as records
    from perfline.analysis import sequential_confirmation
    from perfline.cli.progress import ProgressObserver
    from perfline.runner import RunContext
    from perfline.store import Regression, Store
    from perfline.targets import local

    before = counted_run(tmp_path, build(tmp_path, 1000000), "count=instructions", repeat=2)
    after = counted_run(tmp_path, build(tmp_path, 1004000), "count=instructions", repeat=2)  # +0.4%
    [metric] = samples(before)
    store = Store.open(f"sqlite:///{tmp_path / 'db'}")
    regression, _ = store.record_regression(Regression(
        0, metric, "command", before["case"], before["fingerprint"]["machine_id"], before["id"], after["id"],
        "regression", 0.4, (0.3, 0.5), 4.0, "new", None, *(2 * [store.get_run(after["id"]).info.started_at])))
    found = records.reproduction(store, regression, 20, local.fingerprint())
    with ProgressObserver(Console(file=io.StringIO()), [found.before, found.after]) as observer:
        ctx = RunContext(store=store, fingerprint=local.fingerprint, observer=observer)
        judged, comparison = sequential_confirmation.confirm(store, regression, found, ctx, 20,
                                                             SequentialPlan.up_to(20, 0.01))
    [row] = [r for r in comparison.rows if r.metric.name == metric]
    assert judged.status == "confirmed" and row.base.n == 2, judged.note
