"""What an importer makes of a file: runs as far as the file tells, before the store.

Every importer turns its format into `ImportedRun`s and raises ImportError_ with the
file (and line, where the parser knows it) for anything it cannot read; nothing is
stored until the whole input was read (cli.interop stores it in one transaction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from perfline.records.errors import UserError
from perfline.records.metric import Direction


class ImportFailed(UserError, ValueError):
    """The input is not what its format says; the message names the file (and line)."""

    def __init__(self, path: Path | str, message: str, line: int | None = None) -> None:
        super().__init__(message, path, line)


@dataclass(frozen=True)
class ImportedMetric:
    name: str
    unit: str
    direction: Direction
    values: list[float]
    # A mean (and stddev, n) without the raw values: stored as one value, marked so that
    # compare does not take one number for a sample.
    summary_only: dict[str, float] | None = None


@dataclass
class ImportedRun:
    benchmark: str
    params: dict[str, str | int | float | bool]
    metrics: list[ImportedMetric] = field(default_factory=list)
    started_at: datetime | None = None
    hostname: str | None = None
    commit: str | None = None
    facts: dict[str, str] = field(default_factory=dict)  # CPU, OS, ... as the file gives them
    label: str | None = None  # the file's name for the setup (PTS's system identifier)

    @property
    def samples(self) -> int:
        return sum(len(m.values) for m in self.metrics)


def finite(values: list[Any]) -> tuple[list[float], int]:
    """The finite values and how many were not (NaN, ±Infinity: skipped and counted)."""
    kept = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]
    return kept, len(values) - len(kept)


# Seconds per unit, for formats that mix units within one file.
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
