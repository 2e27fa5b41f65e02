"""report.figures: each figure function writes a PNG from a few plain numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfline.report.figures import (
    Estimate,
    Labelled,
    grouped_bars,
    heatmap,
    sweep_plot,
    value_label,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 2000, path


def test_estimates_ci_and_stddev() -> None:
    ci = Estimate.ci([10.0, 12.0, 11.0, 13.0, 9.0])
    assert ci.mean == pytest.approx(11.0)
    # t(0.975, 4) = 2.776; stddev 1.581; n 5 → half-width 1.963
    assert (ci.low, ci.high) == (pytest.approx(9.037, abs=1e-3), pytest.approx(12.963, abs=1e-3))
    assert ci.values == (10.0, 12.0, 11.0, 13.0, 9.0)
    spread = Estimate.stddev([10.0, 12.0, 11.0, 13.0, 9.0])
    assert (spread.low, spread.high) == (pytest.approx(9.419, abs=1e-3), pytest.approx(12.581, abs=1e-3))
    one = Estimate.ci([4.0])
    assert one.low == one.high == one.mean == 4.0


def test_grouped_bars_ab_per_condition(tmp_path: Path) -> None:
    path = tmp_path / "ab.png"
    grouped_bars(
        path,
        ["idle", "1 CPU hog"],
        [
            Labelled("fqs=1", (Estimate.ci([11.0, 12.0, 13.0]), Estimate.ci([20.0, 21.0, 19.5]))),
            Labelled("fqs=0", (Estimate.ci([10.0, 10.5, 11.0]), Estimate.ci([20.5, 21.5, 19.0]))),
        ],
        title="rcu-gp.ms_per_gp",
        ylabel=value_label("ms", "lower"),
        notes=["-12.5% [-20.1, -4.2]", ""],
    )
    assert_png(path)


def test_grouped_bars_per_cpu_with_stddev(tmp_path: Path) -> None:
    path = tmp_path / "cpus.png"
    series = [
        Labelled("idle", (Estimate.stddev([40.0, 45.0]), Estimate.stddev([42.0, 60.0]))),
        Labelled("2 hogs", (Estimate.stddev([80.0, 9500.0]), Estimate.stddev([70.0, 75.0]))),
    ]
    grouped_bars(path, ["CPU 0", "CPU 1"], series, title="max gap", ylabel="µs", error="stddev", log=True)
    assert_png(path)


def test_grouped_bars_rejects_a_short_series(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="1 estimates for 2 categories"):
        grouped_bars(tmp_path / "x.png", ["a", "b"], [Labelled("s", (Estimate.ci([1.0]),))],
                     title="t", ylabel="y")


def test_sweep_plot(tmp_path: Path) -> None:
    path = tmp_path / "sweep.png"
    throughput = [[300.0, 310.0, 305.0], [560.0, 580.0, 570.0], [590.0, 600.0, 585.0]]
    sweep_plot(
        path,
        [1, 2, 4],
        [Labelled("tbench", tuple(Estimate.stddev(v) for v in throughput))],
        title="tbench.throughput",
        xlabel="clients",
        ylabel=value_label("MB/s", "higher"),
    )
    assert_png(path)


def test_heatmap_with_cell_text(tmp_path: Path) -> None:
    path = tmp_path / "matrix.png"
    heatmap(
        path,
        [[0.0, 1.9], [1.0, -0.1]],
        ["from CPU 0", "from CPU 1"],
        ["to CPU 0", "to CPU 1"],
        title="migration cost",
        unit="µs",
        cells=[["0.0(0.0)", "1.9(0.3)"], ["1.0(0.1)", "-0.1(0.1)"]],
    )
    assert_png(path)
    with pytest.raises(ValueError, match="shape"):
        heatmap(tmp_path / "bad.png", [[1.0, 2.0]], ["a", "b"], ["c"], title="t", unit="u")


def test_value_label() -> None:
    assert value_label("ms", "lower") == "ms (lower is better)"
    assert value_label("%", "neutral") == "%"
