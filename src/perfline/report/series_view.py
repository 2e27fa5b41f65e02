"""A series as a terminal view and as a PNG: each point with its spread, change points
marked with their % change — the "simple daily number, preferably a nice graph"."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from perfline.analysis.series import Series, judge
from perfline.report.figures import (
    CHANGE,
    IMPROVEMENT,
    PRIMARY,
    REGRESSION,
    Estimate,
    new_axes,
    plot_points,
    save,
    style_axes,
    value_label,
)
from perfline.report.runs import ARROWS, number
from perfline.stats.summary import summarize

if TYPE_CHECKING:
    from perfline.stats.changepoint import ChangePoint

BARS = "▁▂▃▄▅▆▇█"
# A long series keeps a readable figure: 0.35 inch a point up to 20 inches (2,400 pixels
# at 120 dpi, far below matplotlib's 2^16 limit), and at most this many x labels.
MAX_WIDTH_IN = 20.0
MAX_TICK_LABELS = 40
KIND_STYLE = {"regression": "bold red", "improvement": "bold green", "change": "yellow"}


def history_table(series: Series, changes: list[ChangePoint]) -> Table:
    metric = series.metric
    title = (
        f"{metric.name} ({metric.unit}{ARROWS[metric.direction.value]})  {series.benchmark} "
        f"{series.case_key}  on {series.hostname}, by {series.order}"
    )
    table = Table(title=title, title_justify="left")
    for column in ("#", "point", "runs", "mean", "±stddev", "n", "", "change"):
        table.add_column(column, justify="right" if column in ("#", "mean", "±stddev", "n") else "left")
    means = [summarize(p.values).mean for p in series.points]
    low, high = min(means), max(means)
    at = {c.index: c for c in changes}
    for index, (point, mean) in enumerate(zip(series.points, means, strict=True)):
        summary = summarize(point.values)
        level = 0 if high == low else round((mean - low) / (high - low) * (len(BARS) - 1))
        change = at.get(index)
        marker = Text("")
        if change is not None:
            kind = judge(metric, change.change_pct)
            marker = Text(
                f"{kind} {change.change_pct:+.1f}% [{change.ci_pct[0]:+.1f}, {change.ci_pct[1]:+.1f}]",
                style=KIND_STYLE[kind],
            )
        table.add_row(
            str(index),
            point.name,
            ",".join(str(r.id) for r in point.runs),
            number(mean),
            f"{summary.cv_pct:.1f}%" if summary.mean else "-",
            str(summary.n),
            BARS[level],
            marker,
        )
    return table


def write_png(series: Series, changes: list[ChangePoint], path: Path) -> None:
    """Every repetition as a dot, the mean ± stddev per point, change points as lines."""
    metric = series.metric
    figure, axes = new_axes(min(MAX_WIDTH_IN, max(6.0, 0.35 * len(series.points) + 3)), 4.2)
    xs = list(range(len(series.points)))
    plot_points(axes, xs, [Estimate.stddev(p.values) for p in series.points], PRIMARY, "mean ± stddev")
    for change in changes:
        kind = judge(metric, change.change_pct)
        color = {"regression": REGRESSION, "improvement": IMPROVEMENT}.get(kind, CHANGE)
        axes.axvline(change.index - 0.5, color=color, linestyle="--", linewidth=1.2)
        axes.annotate(
            f"{change.change_pct:+.1f}%\n[{change.ci_pct[0]:+.1f}, {change.ci_pct[1]:+.1f}]",
            xy=(change.index - 0.5, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -4),
            textcoords="offset points",
            va="top",
            fontsize=8,
            color=color,
        )
    step = math.ceil(len(xs) / MAX_TICK_LABELS)
    axes.set_xticks(xs[::step])
    axes.set_xticklabels([p.name for p in series.points[::step]], rotation=60, ha="right", fontsize=7)
    style_axes(
        axes,
        title=f"{metric.name}  {series.case_key}\n{series.hostname}, by {series.order}",
        ylabel=value_label(metric.unit, metric.direction.value),
    )
    save(figure, path)
