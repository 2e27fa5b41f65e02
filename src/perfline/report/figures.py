"""PNG figures from plain numbers: grouped bars, sweeps and heatmaps.

Each figure function takes typed values (no store, no JSON), draws every repetition it
is given beside the mean and its error bar, and writes one PNG with matplotlib's Agg
backend. `new_axes`, `style_axes`, `save` and `value_label` are the look every perfline
graph shares (`report.history` uses them too).

- `grouped_bars`: one group of bars per category, one bar per series — A/B means with
  their 95% CI per load condition, or the largest latency gap per CPU with ± stddev per
  condition (Rusty's per-CPU graph).
- `sweep_plot`: a metric against a parameter, e.g. tbench throughput against clients.
- `heatmap`: a matrix with every cell's value written in it, e.g. migration cost
  between each ordered pair of CPUs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

# numpy, like matplotlib, is imported where a figure or estimate is computed: `perfline`
# imports this module at start-up (`history`'s table shares its colours).
if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 120
PRIMARY = "#1f4e8c"
REGRESSION = "#c62828"
IMPROVEMENT = "#2e7d32"
CHANGE = "#f9a825"
# Series colours, the first one the primary; dots of a series are a lighter tint of it.
PALETTE = (PRIMARY, "#e07b39", IMPROVEMENT, "#7b1fa2", "#00838f", "#6d4c41")
BETTER = {"higher": "higher is better", "lower": "lower is better"}


@dataclass(frozen=True)
class Estimate:
    """A mean with its error bar from `low` to `high`, and the values behind it."""

    mean: float
    low: float
    high: float
    values: tuple[float, ...] = ()

    @classmethod
    def ci(cls, values: Sequence[float], confidence: float = 0.95) -> Estimate:
        """The mean with its t confidence interval (no bar below two values)."""
        import numpy as np  # numpy: only when computing (see the imports)

        data = np.asarray(values, dtype=float)
        mean = float(data.mean())
        half = 0.0
        if len(data) > 1:
            from scipy import stats  # only figures with intervals pay scipy's import

            sem = float(data.std(ddof=1)) / math.sqrt(len(data))
            half = float(stats.t.ppf((1 + confidence) / 2, len(data) - 1)) * sem
        return cls(mean, mean - half, mean + half, tuple(float(v) for v in data))

    @classmethod
    def stddev(cls, values: Sequence[float]) -> Estimate:
        """The mean ± the sample standard deviation."""
        import numpy as np  # numpy: only when computing

        data = np.asarray(values, dtype=float)
        mean = float(data.mean())
        spread = float(data.std(ddof=1)) if len(data) > 1 else 0.0
        return cls(mean, mean - spread, mean + spread, tuple(float(v) for v in data))


@dataclass(frozen=True)
class Labelled:
    """One series: a legend label and one estimate per category or x value."""

    label: str
    estimates: tuple[Estimate, ...]


def value_label(unit: str, direction: str) -> str:
    """An axis label such as `ms (lower is better)`."""
    better = BETTER.get(direction)
    return f"{unit} ({better})" if better else unit


def new_axes(width: float = 6.4, height: float = 4.2) -> tuple[Figure, Axes]:
    import matplotlib

    matplotlib.use("Agg")  # no display: the PNG is the product
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width, height), dpi=DPI)


def style_axes(
    axes: Axes, *, title: str, xlabel: str = "", ylabel: str = "", legend: bool = True
) -> None:
    axes.set_title(title, fontsize=9)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(axis="y", alpha=0.3)
    if legend and axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7, loc="best")


def save(figure: Figure, path: Path | IO[bytes]) -> None:
    """To a file, or to a binary stream (a PNG to embed in HTML or mail)."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    figure.savefig(path, format="png")
    plt.close(figure)


def _error(estimates: Sequence[Estimate]) -> list[list[float]]:
    """Matplotlib's asymmetric yerr: distances below and above each mean."""
    return [[e.mean - e.low for e in estimates], [e.high - e.mean for e in estimates]]


def _dots(axes: Axes, xs: Sequence[float], estimates: Sequence[Estimate], color: str) -> None:
    # One scatter for all points: a scatter a point took 70 s for a 3000-point series
    # (matplotlib rescales the axes after each).
    dot_xs = [x for x, estimate in zip(xs, estimates, strict=True) for _ in estimate.values]
    dot_ys = [value for estimate in estimates for value in estimate.values]
    axes.scatter(dot_xs, dot_ys, s=9, color=color, alpha=0.45, edgecolors="none", zorder=4)


def plot_points(
    axes: Axes, xs: Sequence[float], estimates: Sequence[Estimate], color: str, label: str
) -> None:
    """Means joined by a line with their error bars, every value a dot of the same hue."""
    _dots(axes, xs, estimates, color)
    axes.errorbar(
        list(xs), [e.mean for e in estimates], yerr=_error(estimates), fmt="o-", color=color,
        capsize=3, markersize=4, linewidth=1, zorder=3, label=label,
    )


def grouped_bars(
    path: Path,
    categories: Sequence[str],
    series: Sequence[Labelled],
    *,
    title: str,
    ylabel: str,
    xlabel: str = "",
    error: str = "95% CI",
    notes: Sequence[str] = (),
    log: bool = False,
) -> None:
    """Bars of each series' means per category, error bars `error`, every value a dot;
    `notes` (one per category, may be empty) are written above the groups, e.g. the
    %change of B against A with its interval. `log`: a logarithmic value axis, for
    heavy-tailed values such as latencies (error bars below zero are cut off there)."""
    import numpy as np  # numpy: only when drawing

    figure, axes = new_axes(max(5.0, 1.6 * len(categories) * max(1, len(series)) ** 0.5 + 2.5))
    width = 0.8 / max(1, len(series))
    base = np.arange(len(categories), dtype=float)
    for index, item in enumerate(series):
        if len(item.estimates) != len(categories):
            raise ValueError(f"{item.label}: {len(item.estimates)} estimates for {len(categories)} categories")
        xs = base + (index - (len(series) - 1) / 2) * width
        color = PALETTE[index % len(PALETTE)]
        axes.bar(
            xs, [e.mean for e in item.estimates], width * 0.92, yerr=_error(item.estimates),
            color=color, alpha=0.75, capsize=4, error_kw={"elinewidth": 1.2},
            label=f"{item.label} (mean ± {error})" if index == 0 else item.label, zorder=2,
        )
        _dots(axes, xs.tolist(), item.estimates, "black")
    for x, note in zip(base, notes, strict=False):
        if note:
            axes.annotate(
                note, xy=(x, 1.0), xycoords=("data", "axes fraction"), xytext=(0, -4),
                textcoords="offset points", ha="center", va="top", fontsize=7,
            )
    if log:
        axes.set_yscale("log", nonpositive="clip")
    if notes:
        low, high = axes.get_ylim()
        # room for the notes above the bars
        axes.set_ylim(top=high * (high / low) ** 0.15 if log else high * 1.15)
    axes.set_xticks(base)
    axes.set_xticklabels(categories, fontsize=8)
    # The notes sit along the top edge, where the legend would cover one of them: it
    # goes below the axes instead.
    style_axes(axes, title=title, xlabel=xlabel, ylabel=ylabel, legend=not notes)
    if notes:
        axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=len(series), frameon=False)
    save(figure, path)


def sweep_plot(
    path: Path,
    xs: Sequence[float],
    series: Sequence[Labelled],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    error: str = "stddev",
) -> None:
    """Each series' mean ± `error` against a parameter, every repetition a dot."""
    figure, axes = new_axes()
    for index, item in enumerate(series):
        if len(item.estimates) != len(xs):
            raise ValueError(f"{item.label}: {len(item.estimates)} estimates for {len(xs)} x values")
        plot_points(axes, xs, item.estimates, PALETTE[index % len(PALETTE)], f"{item.label} (mean ± {error})")
    axes.set_xticks(list(xs))
    axes.set_ylim(bottom=0)
    style_axes(axes, title=title, xlabel=xlabel, ylabel=ylabel)
    save(figure, path)


def heatmap(
    path: Path,
    matrix: Sequence[Sequence[float]],
    rows: Sequence[str],
    columns: Sequence[str],
    *,
    title: str,
    unit: str,
    xlabel: str = "",
    ylabel: str = "",
    cells: Sequence[Sequence[str]] | None = None,
) -> None:
    """`matrix[row][column]` as colours with each cell's text (`cells`, else the value)
    written in it."""
    import numpy as np  # numpy: only when drawing

    data = np.asarray(matrix, dtype=float)
    if data.shape != (len(rows), len(columns)):
        raise ValueError(f"matrix of shape {data.shape} for {len(rows)} rows, {len(columns)} columns")
    figure, axes = new_axes(1.1 * len(columns) + 3.0, 0.9 * len(rows) + 2.2)
    image = axes.imshow(data, cmap="Blues", aspect="auto")
    figure.colorbar(image, ax=axes, label=unit)
    middle = (np.nanmin(data) + np.nanmax(data)) / 2
    for r in range(len(rows)):
        for c in range(len(columns)):
            text = cells[r][c] if cells is not None else f"{data[r, c]:.3g}"
            axes.text(
                c, r, text, ha="center", va="center", fontsize=8,
                color="white" if data[r, c] > middle else "black",
            )
    axes.set_xticks(range(len(columns)), list(columns))
    axes.set_yticks(range(len(rows)), list(rows))
    style_axes(axes, title=title, xlabel=xlabel, ylabel=ylabel, legend=False)
    axes.grid(False)
    save(figure, path)
