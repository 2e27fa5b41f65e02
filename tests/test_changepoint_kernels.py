"""The change-point detector's C inner loops give what their numpy formulas give."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import rankdata

import perfline.stats.changepoint as cp
from perfline.stats import changepoint_kernels as kernels


def _values(rng: np.random.Generator, n: int, tied: bool) -> np.ndarray:
    values = rng.standard_t(3, n) * 10.0 ** rng.uniform(-3, 3)
    return np.round(values, 1) if tied else values


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("repetitions", [0, 1, 3])
def test_a_segment_picked_from_the_series_order_ranks_and_scans_as_numpy_does(tied: bool, repetitions: int) -> None:
    rng = np.random.default_rng(repetitions + 10 * tied)
    for _ in range(20):
        per_point = repetitions or 2
        values = _values(rng, per_point * int(rng.integers(40, 400)), tied)
        outer = np.argsort(values)
        points = len(values) // per_point
        a = int(rng.integers(0, points // 2))
        b = int(rng.integers(a + 2 * cp.MIN_SEGMENT, points + 1))
        lo, size, m = a * per_point, (b - a) * per_point, b - a
        segment = values[lo : lo + size]
        spread = cp._split_spread(m)
        scanned = kernels.rank_scan(outer, lo, size, segment if tied else None, repetitions,
                                    spread if repetitions else None)
        assert np.array_equal(segment[scanned.order], np.sort(segment))
        doubled = np.rint(2 * rankdata(segment)).astype(np.int64) - (size + 1)
        assert np.array_equal(scanned.in_place, doubled)
        if not repetitions:
            assert scanned.scores is None
            continue
        scores = doubled.reshape(m, repetitions).sum(axis=1)
        assert scanned.scores is not None and np.array_equal(scanned.scores, scores)
        splits = np.abs(np.cumsum(scores)[cp.MIN_SEGMENT - 1 : m - cp.MIN_SEGMENT]) / spread
        assert scanned.best == cp.MIN_SEGMENT + int(np.argmax(splits))
        assert scanned.z == float(splits.max())  # the same float operations: equal, not close
        assert scanned.energy == float(np.dot(scores, scores))


def test_the_series_order_is_the_argsort_unless_values_may_tie() -> None:
    rng = np.random.default_rng(1)
    for n in (1, 2, 7, 1000, 20_000):
        values = _values(rng, n, tied=False)
        values[::2] *= -1.0
        order = kernels.distinct_order(values)
        assert order is not None and np.array_equal(order, np.argsort(values))
    assert kernels.distinct_order(np.array([3.0, 1.0, 3.0])) is None
    assert kernels.distinct_order(np.array([1.0, -0.0, 2.0, 0.0])) is None  # -0.0 == 0.0
    # Values that only their lowest bits tell apart are left to the argsort.
    assert kernels.distinct_order(np.array([1.0, np.nextafter(1.0, 2.0), 0.5])) is None


def test_difference_quantiles_are_those_of_all_differences_sorted() -> None:
    rng = np.random.default_rng(2)
    for trial in range(300):
        before = _values(rng, int(rng.integers(1, 160)), tied=trial % 2 == 0)
        after = _values(rng, int(rng.integers(1, 160)), tied=trial % 2 == 0) + rng.normal()
        ordered = np.sort(np.subtract.outer(after, before).ravel())
        last = len(ordered) - 1
        c = int(rng.integers(0, last // 2 + 1))
        ranks = (c, last // 2, last // 2 + last % 2, last - c)
        assert kernels.difference_quantiles(before, after, ranks) == [float(ordered[k]) for k in ranks]


def test_the_log_tail_is_the_averaged_sum_of_the_reachable_overshoot_terms() -> None:
    m = 5000
    layout = cp._split_layout(m)
    rng = np.random.default_rng(3)
    reach = np.where(rng.random(len(layout.weights)) < 0.8, np.inf, rng.uniform(0.0, 10.0, len(layout.weights)))
    series = cp._to_series(rng.standard_normal(50))
    for correlation in (cp._Correlation(0.0), cp._Correlation(0.4, 0.05)):
        tester = cp._Tester(series, math.log(0.001), correlation, lambda: np.random.default_rng(0))
        for z in (0.5, 1.5, 4.0, 6.5, 12.0, 40.0):
            b = z * tester.inflation
            half = 0.5 * np.multiply.outer(b, layout.scales)
            below = ndtr(half)
            nu = (below - 0.5) / (half * (half * below + np.exp(-0.5 * half**2) / math.sqrt(2.0 * math.pi)))
            reached = reach >= z * math.sqrt(tester.factor) * (1.0 - 1e-12)
            totals = nu @ (layout.weights * reached)
            with np.errstate(divide="ignore", invalid="ignore"):
                tails = np.log(b * totals) - 0.5 * b**2 - 0.5 * math.log(2.0 * math.pi)
            tails = np.where((b < 1.0) | (totals <= 0.0), 0.0, np.minimum(tails, 0.0)) + tester.log_weights
            out = kernels.doubles([0.0] * len(b))
            log_p = kernels.log_tail(z, tester._constants, layout.scales, layout.weights, reach, out)
            assert out[:] == pytest.approx(tails, rel=1e-13, abs=1e-13)
            assert log_p == pytest.approx(tails.max() + math.log(np.exp(tails - tails.max()).sum()), rel=1e-12, abs=1e-13)


@pytest.mark.parametrize("m", [8, 100, 129, 5000])
def test_the_reach_near_the_ends_is_that_of_the_most_extreme_scores(m: int) -> None:
    scores = np.random.default_rng(m).permutation(np.arange(1 - m, m, 2))
    spread = float(np.sqrt(np.mean(scores.astype(float) ** 2)))
    terms = cp._tail_terms(scores, None, spread)
    layout = cp._split_layout(m)
    edge = min(cp._REACH_EDGE, m - 1)
    ordered = np.sort(scores)
    bounds = np.maximum(np.cumsum(ordered[::-1][:edge]), -np.cumsum(ordered[:edge])) / (spread * layout.bound_spread)
    expected = np.full(len(layout.weights), np.inf)
    expected[layout.near] = bounds[layout.near_j]
    expected[layout.far] = bounds[layout.far_j]
    assert np.array_equal(terms.reach, expected)


def test_points_are_read_in_c_only_when_they_are_lists_of_as_many_floats() -> None:
    assert np.array_equal(kernels.read_points([[1.0, 2.0], [3.0, 4.0]], 2), [1.0, 2.0, 3.0, 4.0])
    for points in ([[1.0], [2.0, 3.0]], [[1.0], [2]], [(1.0,), (2.0,)], [[1.0], None], ((1.0,), (2.0,))):
        assert kernels.read_points(points, 1) is None
    # Whichever way they are read, the same points give the same answer.
    rng = np.random.default_rng(4)
    values = np.round(100.0 + np.where(np.arange(300) < 180, 0.0, 5.0) + rng.normal(0.0, 1.0, 300))
    as_floats = cp.detect([[float(v)] for v in values])
    assert as_floats and cp.detect([[int(v)] for v in values]) == as_floats == cp.detect(values.tolist())


def test_a_checkout_without_the_library_is_told_to_build_it(tmp_path: Path) -> None:
    env = {**os.environ, "PERFLINE_NATIVE_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", "from perfline.stats.changepoint import detect; detect(list(range(10)))"],
                         check=False, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert f"native helper libchangepoint.so not found at {tmp_path}/libchangepoint.so: run `make native`" in run.stderr
