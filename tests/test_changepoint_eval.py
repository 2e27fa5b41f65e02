"""bench/changepoint_eval.py: TCPDBench's F1, perfline at looser rates, the linear reference."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import changepoint_eval as evaluation  # noqa: E402
import changepoint_trend as trend  # noqa: E402

from perfline.stats.changepoint import detect  # noqa: E402


def test_f1_counts_index_0_and_matches_within_the_margin() -> None:
    # No annotated change and none found: index 0 alone is a perfect answer.
    assert evaluation.f_measure({"a": [], "b": []}, []) == 1.0
    # Within 5 points of the annotation it matches; 6 points off it is a false alarm.
    assert evaluation.f_measure({"a": [50]}, [55]) == 1.0
    assert evaluation.f_measure({"a": [50]}, [56]) == pytest.approx(0.5)
    # Recall is averaged over annotators: b also saw a change at 20, which was missed.
    assert evaluation.f_measure({"a": [50], "b": [20]}, [50]) == pytest.approx(2 * 1.0 * 0.75 / 1.75)


def test_perfline_runs_at_the_rate_it_is_given() -> None:
    rng = np.random.default_rng(4)
    values = 100.0 * np.where(np.arange(60) >= 40, 1.025, 1.0) * (1.0 + 0.02 * rng.standard_normal(60))
    case = evaluation.Case("weak step", [[v] for v in values], {"truth": [40]})
    [strict] = evaluation._perfline(1e-6)([case])
    [loose] = evaluation._perfline(0.05)([case])
    assert strict.found == []
    assert len(loose.found) == 1 and abs(loose.found[0] - 40) <= 5
    # The interval is the change point's, for the coverage column.
    [(index, low, high)] = loose.intervals
    assert index == loose.found[0] and low < 2.5 < high


def test_coverage_counts_the_intervals_of_matched_steps_once() -> None:
    case = evaluation.Case("two steps", [[1.0]] * 200, {"truth": [50, 120]}, {50: 3.0, 120: -4.0})
    # 52 matches 50 and covers 3 %; 118 matches 120 and misses -4 %; 180 matches nothing.
    outcome = evaluation.Outcome([52, 118, 180], 0.0, [(52, 2.0, 4.0), (118, -3.5, -1.0), (180, 0.0, 9.0)])
    assert evaluation.interval_coverage(case, outcome) == (1, 2)
    # Baselines give no intervals: nothing is matched, coverage is not claimed.
    assert evaluation.interval_coverage(case, evaluation.Outcome([52, 118], 0.0)) == (0, 0)


def test_looser_rates_and_the_trend_reference_are_extra_rows_that_are_not_timed() -> None:
    args = argparse.Namespace(
        rates=[0.01],
        trend_reference=True,
        otava_python=Path("/nonexistent"),
        edivisive_python=Path("/nonexistent"),
    )
    rows = {m.name: m for m in evaluation.methods(args)}
    assert rows["perfline"].timed
    assert not rows["perfline at 0.01"].timed
    assert not rows["linear"].timed
    assert not any(row.timed for name, row in rows.items() if name.startswith("switch to linear"))


def test_the_linear_reference_finds_a_slope_change_in_a_smooth_series() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(120, dtype=float)
    # Rising until 70, then falling: a kink, no step.
    values = np.where(t < 70, t, 140.0 - t) + 0.5 * rng.standard_normal(120)
    found = trend.linear(values.tolist())
    assert any(abs(cp - 70) <= 5 for cp in found)
    assert len(found) <= 3


def test_the_linear_references_null_is_calibrated_on_white_gaussian_noise() -> None:
    # The p-value of the best split is uniform under the null it was simulated for; at
    # 0.05, 400 series give 20 +- 4.4 rejections, and 8..36 is about +-2.7 sd.
    rng = np.random.default_rng(11)
    testers = [trend._LineTester(rng.standard_normal(40), np.log(0.05), 1.0) for _ in range(400)]
    rejected = sum(tester.test(0, 40).significant for tester in testers)
    assert 8 <= rejected <= 36


def test_switching_keeps_perflines_levels_unless_a_segment_trends() -> None:
    rng = np.random.default_rng(3)
    steps = 100.0 * np.where(np.arange(200) >= 120, 1.05, 1.0) * (1.0 + 0.01 * rng.standard_normal(200))
    levels = [cp.index for cp in detect(steps.tolist())]
    assert trend.switching(steps.tolist(), level=0.001) == levels
    t = np.arange(200, dtype=float)
    kinked = np.where(t < 120, t, 240.0 - t) + rng.standard_normal(200)
    assert trend.trending(kinked, [cp.index for cp in detect(kinked.tolist())], 0.001)
    assert any(abs(cp - 120) <= 5 for cp in trend.switching(kinked.tolist(), level=0.001))
