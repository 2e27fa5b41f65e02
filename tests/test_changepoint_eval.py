"""bench/changepoint_eval.py: TCPDBench's F1, perfline at looser rates, the trend reference."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import changepoint_baselines as baselines  # noqa: E402
import changepoint_eval as evaluation  # noqa: E402


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
    [(strict, _)] = evaluation._perfline(1e-6)([case])
    [(loose, _)] = evaluation._perfline(0.05)([case])
    assert strict == []
    assert len(loose) == 1 and abs(loose[0] - 40) <= 5


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
    assert not rows["ruptures linear 30xBIC"].timed


def test_the_trend_reference_finds_a_slope_change_in_a_smooth_series() -> None:
    pytest.importorskip("ruptures")
    rng = np.random.default_rng(0)
    t = np.arange(120, dtype=float)
    # Rising until 70, then falling: a kink, no step.
    values = np.where(t < 70, t, 140.0 - t) + 0.5 * rng.standard_normal(120)
    found = baselines.ruptures_linear(values)
    assert any(abs(cp - 70) <= 5 for cp in found)
    assert len(found) <= 3
