"""Verdicts an automated tracker can act on: powered null and step simulations of the
rules in docs/statistics.md (runs as the unit, the four answers, monitor metrics judged
together), and the ABBA order of `perfline ab` on real processes.

Each null simulation has enough trials that the old rule's rate (13-38% for runs
pooled as repetitions, 21.5% for a table with any `*`) fails it by many standard errors,
while the new rule's expected ~1% passes with a margin of 4 or more."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from perfline.analysis.comparison import MetricRow, family_controlled_together
from perfline.records.metric import Direction, Metric
from perfline.stats.multiplicity import benjamini_hochberg
from perfline.stats.sequential import FIRST_LOOK, SequentialPlan
from perfline.stats.summary import summarize
from perfline.stats.two_sample import compare

SCORE = Metric("bench.seconds", "s", Direction.LOWER)
MONITOR = Metric("mon.value", "", Direction.NEUTRAL)


def runs_of(rng: np.random.Generator, level: float, runs: int, per_run: int, between_cv: float,
            within_cv: float) -> tuple[list[float], list[int]]:
    """`runs` runs of `per_run` values: each run's level moved by the between-run noise."""
    values: list[float] = []
    labels: list[int] = []
    for run in range(runs):
        run_level = level * rng.lognormal(0, between_cv)
        values += (run_level * rng.lognormal(0, within_cv, per_run)).tolist()
        labels += [run] * per_run
    return values, labels


def false_rate(runs: int, per_run: int, between_cv: float, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    false = 0
    for _ in range(trials):
        (a, la), (b, lb) = (runs_of(rng, 100.0, runs, per_run, between_cv, 0.01) for _ in range(2))
        false += compare(a, b, SCORE, base_runs=la, other_runs=lb).significant
    return false / trials


@pytest.mark.parametrize(("runs", "per_run", "between_cv"), [(1, 10, 0.01), (3, 5, 0.01), (5, 5, 0.02)])
def test_run_to_run_variance_does_not_make_false_verdicts(runs: int, per_run: int, between_cv: float) -> None:
    # Pooled as repetitions these gave 38%, 15% and more; 400 trials put a 3% bound
    # 4 standard errors above the nominal 1%.
    assert false_rate(runs, per_run, between_cv, trials=400, seed=runs) <= 0.03


def test_runs_as_the_unit_still_find_a_real_step() -> None:
    """3 runs x 5 a side in 1% noise: a 3% step is found (the issue asks 90%; run means
    on 2 degrees of freedom a side give about 82%).
    With 0.5% between runs as well, run means on 2 degrees of freedom a side find it
    about half the time: bench/calibration.py prints that row."""
    rng = np.random.default_rng(11)
    found = 0
    for _ in range(200):
        a, la = runs_of(rng, 100.0, 3, 5, 0.0, 0.01)
        b, lb = runs_of(rng, 103.0, 3, 5, 0.0, 0.01)
        found += compare(a, b, SCORE, base_runs=la, other_runs=lb).verdict == "regression"
    assert found / 200 >= 0.75  # 82% here: below the 90%, see docs/statistics.md


def with_outliers(rng: np.random.Generator, level: float, n: int) -> list[float]:
    """1% noise with 10% of the samples at three times the level (a preempted run)."""
    return (level * np.where(rng.random(n) < 0.1, 3.0, 1.0) * rng.lognormal(0, 0.01, n)).tolist()


def test_outliers_neither_hide_a_step_nor_make_one() -> None:
    """The trimmed (Yuen) test judges when outliers are present: a 5% step with 10% of
    samples at x3, n=20 a side, is found ~90% of the time (the mean's t test: 2%), and
    the same noise without a step gives no more false verdicts than clean noise."""
    rng = np.random.default_rng(5)
    found = sum(compare(with_outliers(rng, 100, 20), with_outliers(rng, 105, 20), SCORE).verdict == "regression"
                for _ in range(150))
    assert found / 150 >= 0.75
    false = sum(compare(with_outliers(rng, 100, 20), with_outliers(rng, 100, 20), SCORE).significant
                for _ in range(400))
    assert false / 400 <= 0.03


def test_the_trimmed_change_is_the_one_its_interval_and_test_are_about() -> None:
    rng = np.random.default_rng(6)
    for _ in range(30):
        c = compare(with_outliers(rng, 100, 20), with_outliers(rng, 104, 20), SCORE, paired=True)
        assert c.ci_pct[0] <= c.change_pct <= c.ci_pct[1]
        assert (c.p_value < 0.05) == (c.ci_pct[0] > 0 or c.ci_pct[1] < 0)


def test_no_change_only_when_the_interval_is_inside_the_floor() -> None:
    rng = np.random.default_rng(3)
    wide = compare(rng.lognormal(0, 0.05, 5), rng.lognormal(0, 0.05, 5), SCORE)
    assert wide.verdict == "inconclusive" and wide.more_samples is not None and wide.more_samples > 5
    narrow = compare(100 * rng.lognormal(0, 0.003, 30), 100 * rng.lognormal(0, 0.003, 30), SCORE)
    assert narrow.ci_pct[0] > -1 and narrow.ci_pct[1] < 1 and narrow.verdict == "no change"
    # The case of the issue: a large change seen, not significant at 0.01: not "no change".
    seen = compare([1.0, 1.02, 0.98, 1.01, 0.99, 1.0], [0.6, 0.65, 0.62, 0.9, 0.95, 0.63], SCORE)
    assert not seen.significant and seen.ci_pct[1] < -1 and seen.verdict == "inconclusive"


def test_the_estimate_of_more_samples_decides_most_comparisons() -> None:
    """With the samples the estimate asks for, most comparisons of a 3% step in 2% noise
    that were inconclusive at 5 a side are decided."""
    rng = np.random.default_rng(21)
    decided = tried = 0
    while tried < 100:
        a, b = 100 * rng.lognormal(0, 0.02, 5), 103 * rng.lognormal(0, 0.02, 5)
        first = compare(a, b, SCORE)
        if first.verdict != "inconclusive" or first.more_samples is None:
            continue
        tried += 1
        extra = first.more_samples
        a2 = np.concatenate([a, 100 * rng.lognormal(0, 0.02, extra)])
        b2 = np.concatenate([b, 103 * rng.lognormal(0, 0.02, extra)])
        decided += compare(a2, b2, SCORE).verdict != "inconclusive"
    assert decided / tried >= 0.5


def test_monitor_metrics_are_judged_together() -> None:
    """Null tables of one benchmark metric and 25 monitor metrics: before, 21.5% showed
    at least one false `*`; with the monitors judged together about 1% + 1% may."""
    rng = np.random.default_rng(7)
    any_star = 0
    tables = 300
    for _ in range(tables):
        rows = []
        for metric in [SCORE] + [MONITOR] * 25:
            a, b = 100 * rng.lognormal(0, 0.02, 10), 100 * rng.lognormal(0, 0.02, 10)
            source = "benchmark" if metric is SCORE else "monitor"
            rows.append(MetricRow(metric, source, summarize(a.tolist()), [compare(a, b, metric, floor_pct=0)]))
        judged = family_controlled_together(rows, 0.01, {0})
        any_star += any(c is not None and c.significant for row in judged for c in row.others)
    assert any_star / tables <= 0.05


def test_twenty_columns_of_no_change_show_a_star_in_at_most_2_percent_of_tables() -> None:
    """`compare --csv` of 20 independent columns with no change: each at α, 18% of tables
    would show a `*` (1 - 0.99^20); as one family (Benjamini–Hochberg at α/2), about 0.5%.
    3000 seeded tables of Welch tests of the logs (compare's test on clean samples,
    vectorised: compare itself costs 4 ms a call, bench/verdict_scenarios.py measures it
    through compare): the family's rate must be at most 2% (0.5% is 11 s.e. below), and
    column by column several times that, so the check can tell."""
    rng = np.random.default_rng(11)
    tables, columns = 3000, 20
    a, b = rng.normal(0, 0.02, (tables, columns, 10)), rng.normal(0, 0.02, (tables, columns, 10))
    p = scipy_stats.ttest_ind(a, b, axis=2, equal_var=False).pvalue
    family = sum(any(benjamini_hochberg(row.tolist(), 0.005)) for row in p)
    separate = int((p < 0.01).any(axis=1).sum())
    assert family / tables <= 0.02
    assert separate / tables >= 0.10


def test_a_real_monitor_change_survives_the_correction() -> None:
    rng = np.random.default_rng(8)
    rows = [MetricRow(MONITOR, "monitor", summarize([1.0]), [compare(100 * rng.lognormal(0, 0.02, 10),
                                                                     100 * rng.lognormal(0, 0.02, 10), MONITOR)])
            for _ in range(24)]
    moved = compare(100 * rng.lognormal(0, 0.02, 10), 130 * rng.lognormal(0, 0.02, 10), MONITOR)
    rows.append(MetricRow(MONITOR, "monitor", summarize([1.0]), [moved]))
    judged = family_controlled_together(rows, 0.01, {0})
    assert judged[-1].others[0] is not None and judged[-1].others[0].verdict == "changed"


def test_ab_alternates_which_side_goes_first(tmp_path: Path) -> None:
    log = tmp_path / "order"
    proc = subprocess.run(
        [sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "ab", "command",
         "-p", "cmd=echo x", "--a", f"param:cmd=echo A >> {log}; echo 1",
         "--b", f"param:cmd=echo B >> {log}; echo 1", "--pairs", "4", "--warmup", "0", "--no-monitors"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().split() == ["A", "B", "B", "A", "A", "B", "B", "A"]


def test_pairs_auto_keeps_its_level_where_looking_every_pair_would_not() -> None:
    """A/A pairs in 1% noise, stopped by the plan: a false regression/improvement at most
    ~1% (400 sequences: 3% is 4 standard errors above). The same data judged at α after
    every pair, stopping at the first `*`, errs about 6% of the time: the check could
    tell the two apart."""
    plan = SequentialPlan.up_to(30, 0.01)
    rng = np.random.default_rng(9)
    false = naive = 0
    for _ in range(400):
        a, b = (100 * rng.lognormal(0, 0.01, 30)).tolist(), (100 * rng.lognormal(0, 0.01, 30)).tolist()
        n = next(n for n in range(1, 31) if plan.done(a[:n], b[:n], SCORE, 1.0))
        false += plan.judge(a[:n], b[:n], SCORE, 1.0).significant
        naive += any(compare(a[:k], b[:k], SCORE, paired=True).significant for k in range(5, 31))
    assert false / 400 <= 0.03
    assert naive / 400 > false / 400


def test_ab_pairs_auto_stops_once_decided(tmp_path: Path) -> None:
    """Real processes: B sleeps 10x as long as A. The A/B stops at the first look whose
    verdict is not inconclusive, judged again here from the stored samples: usually the
    first (6 pairs), later when a stall of this busy machine (a `sleep 0.01` once took
    0.18 s) lands in one of its pairs."""
    db = tmp_path / "db"
    proc = subprocess.run(
        [sys.executable, "-m", "perfline", "--db", str(db), "ab", "command", "-p", "cmd=true", "-p", "timing=true",
         "--a", "param:cmd=sleep 0.01", "--b", "param:cmd=sleep 0.1", "--pairs", "auto",
         "--warmup", "0", "--no-monitors", "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    case = document["cases"][0]
    primary = case["metrics"][0]
    assert primary["others"][0]["verdict"] == "regression"
    plan = SequentialPlan.up_to(30, 0.01)
    with sqlite3.connect(db) as connection:
        a, b = ([value for (value,) in connection.execute(
            "SELECT value FROM samples WHERE run_id = ? AND metric = ? ORDER BY repetition", (run, primary["metric"]))]
            for run in (1, 2))
    stopped = next(n for n in plan.looks if plan.done(a[:n], b[:n], Metric(primary["metric"], "s", Direction.LOWER), 1.0))
    assert len(a) == len(b) == primary["base"]["n"] == stopped < plan.looks[-1]
    assert document["alpha"] == pytest.approx(plan.alpha_at(stopped))
    assert any(f"--pairs auto stopped after {stopped} pairs" in note for note in case["notes"])
    bad = subprocess.run([sys.executable, "-m", "perfline", "--db", str(db), "ab", "command", "--a", "x:y=1",
                          "--b", "x:y=2", "--pairs", "many"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --pairs 'many'")
