"""Both sides' samples of each metric of a comparison, as the compare page draws them
beside the numbers: a strip of dots per side, or a box plot when a side has too many
samples to tell dots apart. Coordinates are computed here and drawn as inline SVG by
the template (no script, nothing to load), on one scale shared by the sides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfline.analysis.comparison import Side

# Beyond this many samples on a side, its dots overlap into a bar: draw quartiles.
MAX_DOTS = 200
WIDTH = 280.0
ROW = 18.0
_GOLDEN = (math.sqrt(5) - 1) / 2


@dataclass(frozen=True)
class Box:
    low: float  # whisker ends: the lowest and highest sample
    q1: float
    median: float
    q3: float
    high: float


@dataclass(frozen=True)
class SideStrip:
    name: str
    y: float  # the row's centre
    dots: list[tuple[float, float]]  # (x, y) per sample; empty when drawn as a box
    box: Box | None
    mean: float  # x of the mean


@dataclass(frozen=True)
class Strip:
    sides: list[SideStrip]
    width: float
    height: float
    low: str  # the scale's ends, as labels
    high: str
    description: str  # the plot in words, for a screen reader


def strips(sides: Sequence[Side]) -> dict[str, Strip]:
    """Per metric any side has samples of: its strip plot."""
    metrics = dict.fromkeys(name for side in sides for name in side.metrics())
    return {metric: _strip(metric, sides) for metric in metrics}


def _strip(metric: str, sides: Sequence[Side]) -> Strip:
    values = [np.asarray(side.values(metric), dtype=float) for side in sides]
    present = [v for v in values if v.size]
    low = min(float(v.min()) for v in present)
    high = max(float(v.max()) for v in present)
    span = high - low or abs(high) or 1.0
    pad = 6.0

    def x(value: float) -> float:
        return round(pad + (value - low) / span * (WIDTH - 2 * pad), 1)

    rows = []
    words = []
    for i, (side, v) in enumerate(zip(sides, values, strict=True)):
        y = ROW * i + ROW / 2
        if not v.size:
            words.append(f"{side.name}: no samples")
            continue
        box = None
        dots: list[tuple[float, float]] = []
        if v.size > MAX_DOTS:
            q1, median, q3 = (float(q) for q in np.percentile(v, [25, 50, 75]))
            box = Box(x(float(v.min())), x(q1), x(median), x(q3), x(float(v.max())))
        else:
            # A fixed jitter (golden-ratio steps): equal values stay apart, and the
            # same samples always draw the same picture.
            dots = [(x(float(value)), round(y + (((k * _GOLDEN) % 1.0) - 0.5) * (ROW - 6), 1))
                    for k, value in enumerate(v)]
        rows.append(SideStrip(side.name, y, dots, box, x(float(v.mean()))))
        words.append(f"{side.name}: {v.size} samples from {_fmt(float(v.min()))} to {_fmt(float(v.max()))}, "
                     f"mean {_fmt(float(v.mean()))}")
    return Strip(rows, WIDTH, ROW * len(sides), _fmt(low), _fmt(high), f"{metric}: " + "; ".join(words))


def _fmt(value: float) -> str:
    return f"{value:.4g}"
