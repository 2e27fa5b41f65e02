"""A bisection's posterior after each probe, as the bisection page draws it: one row per
probe, one column per commit of the range (or per group of neighbouring commits when
the range is wider than the page), each cell as dark as the probability that its
commit is the first bad one. The probed commit of each row is marked. Drawn as inline
SVG by the template; every cell's title says its commits and probability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the driver is imported when a bisection page is first asked for
    from perfline.bisect.driver import Step

MAX_COLUMNS = 120  # wider ranges: neighbouring commits share a column (their mass summed)
PLOT_WIDTH = 720.0  # the columns' width together, at most 60 px a column
ROW = 16.0
LABEL = 150.0  # the rows' labels on the left


@dataclass(frozen=True)
class Cell:
    x: float
    opacity: float  # the probability, floored so that a cell with any mass shows
    title: str


@dataclass(frozen=True)
class Row:
    y: float
    label: str
    cells: list[Cell]
    probe_x: float  # centre of the probed commit's column


@dataclass(frozen=True)
class PosteriorMap:
    rows: list[Row]
    ticks: list[tuple[float, str]]  # (x, short sha) of a few columns
    width: float
    height: float
    cell: float
    row: float
    left: float
    description: str


def posterior_map(commits: Sequence[str], steps: Sequence[Step]) -> PosteriorMap | None:
    """None when no step has a posterior (a bisection that has not measured yet)."""
    probes = [(n, s) for n, s in enumerate(steps, start=1) if s.posterior]
    if not probes:
        return None
    per = -(-len(commits) // MAX_COLUMNS)  # commits a column
    columns = -(-len(commits) // per)
    cell = min(60.0, PLOT_WIDTH / columns)
    rows = []
    for i, (n, step) in enumerate(probes):
        y = i * ROW
        cells = []
        for c in range(columns):
            mass = sum(step.posterior[c * per:(c + 1) * per])
            first, end = commits[c * per][:12], commits[min((c + 1) * per, len(commits)) - 1][:12]
            where = first if per == 1 else f"{first}..{end}"
            cells.append(Cell(LABEL + c * cell, round(max(mass, 0.04 if mass > 1e-3 else 0.0), 3),
                              f"after probe {n}: P(first bad commit is {where}) = {mass:.3f}"))
        probed = step.sample.commit_index // per
        rows.append(Row(y, f"{n}: {commits[step.sample.commit_index][:7]} {step.sample.phase}", cells,
                        LABEL + probed * cell + cell / 2))
    every = -(-60 // int(cell))  # columns between two labels of 7 characters
    ticks = [(LABEL + c * cell + cell / 2, commits[c * per][:7]) for c in range(0, columns, every)]
    last = probes[-1][1]
    culprit = "" if last.culprit is None else f"; after the last, {commits[last.culprit][:12]} with P {last.probability:.3f}"
    description = (f"posterior of the first bad commit over {len(commits)} commits after each of {len(probes)} "
                   f"probes{culprit}")
    return PosteriorMap(rows, ticks, LABEL + columns * cell, len(rows) * ROW, cell, ROW, LABEL, description)
