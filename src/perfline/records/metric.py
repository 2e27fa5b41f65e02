"""Metrics and the values measured for them: the records every package passes around."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Direction(StrEnum):
    """Which way is better for a metric; decides whether a change is a regression."""

    HIGHER = "higher"
    LOWER = "lower"
    # Monitor figures such as context switches/s describe the system, they are not a score.
    NEUTRAL = "neutral"


# Units of counts (benchmarks.counting): a metric in one of them repeats exactly, or
# nearly, and its noise is measured rather than assumed (stats.counted).
COUNTED_UNITS = frozenset({"instructions", "est. cycles"})


@dataclass(frozen=True)
class Metric:
    """A named quantity, `source.name` (e.g. `tbench.throughput`), with unit and direction."""

    name: str
    unit: str
    direction: Direction
    description: str = ""

    @property
    def counted(self) -> bool:
        return self.unit in COUNTED_UNITS


@dataclass(frozen=True)
class Measurement:
    """One value of one metric, measured in one repetition."""

    metric: Metric
    value: float
