"""A tracker as the terminal, `--json` and a PNG show it: its state, its daily number,
and the graph of that number over the commits with changes and culprits marked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rich.table import Table
from rich.text import Text

from perfline.report.figures import new_axes, save, style_axes
from perfline.store import Regression
from perfline.store.trackers import DailyNumber, TrackerRecord


@dataclass(frozen=True)
class TrackerState:
    tracker: TrackerRecord
    last_tested: str | None
    tested: int
    pending: int
    open_regressions: int
    budget_left: int
    numbers: list[DailyNumber]

    def to_json(self) -> dict[str, Any]:
        latest = self.numbers[-1] if self.numbers else None
        return {
            "name": self.tracker.name, "branch": self.tracker.branch, "head": self.tracker.head,
            "since": self.tracker.since, "last_tested": self.last_tested, "tested": self.tested,
            "pending": self.pending, "open_regressions": self.open_regressions, "budget_left": self.budget_left,
            "daily_number": None if latest is None else {
                "commit": latest.commit, "value": latest.value, "ci": [latest.low, latest.high],
            },
            "daily_numbers": [{"commit": n.commit, "position": n.position, "subject": n.subject, "value": n.value,
                               "ci": [n.low, n.high], "tested_at": n.tested_at.isoformat()} for n in self.numbers],
        }


def status_table(states: Sequence[TrackerState]) -> Table:
    table = Table(title="trackers", title_justify="left",
                  caption="number: geometric mean of the primary metrics against the first tested commit, "
                          "x100, above 100 is better, with its 95% interval", caption_justify="left")
    for column in ("name", "branch", "head", "last tested", "tested", "pending", "open regressions",
                   "budget left", "number"):
        table.add_column(column, justify="right" if column in ("tested", "pending", "budget left") else "left")
    for s in states:
        latest = s.numbers[-1] if s.numbers else None
        number = Text("-") if latest is None else Text(
            f"{latest.value:.1f} [{latest.low:.1f}, {latest.high:.1f}]",
            style="red" if latest.high < 100 else "green" if latest.low > 100 else "")
        table.add_row(s.tracker.name, s.tracker.branch, (s.tracker.head or "-")[:12], (s.last_tested or "-")[:12],
                      str(s.tested), str(s.pending), str(s.open_regressions), str(s.budget_left), number)
    return table


def numbers_table(state: TrackerState) -> Table:
    table = Table(title=f"{state.tracker.name}: the number per tested commit", title_justify="left")
    for column in ("#", "commit", "subject", "number [95% CI]"):
        table.add_column(column)
    for n in state.numbers:
        table.add_row(str(n.position), n.commit[:12], n.subject, f"{n.value:.1f} [{n.low:.1f}, {n.high:.1f}]")
    return table


def draw_graph(name: str, numbers: Sequence[DailyNumber], regressions: Sequence[Regression],
               positions: Mapping[str, int], path: Path | IO[bytes]) -> None:
    """The number over the branch's commits (`positions`: first-parent index of every
    commit since `since`), its interval as a band, each regression's tested range shaded,
    and its culprit drawn as a line at its own commit."""
    figure, axes = new_axes(8.0, 4.2)
    xs = [n.position for n in numbers]
    axes.fill_between(xs, [n.low for n in numbers], [n.high for n in numbers], alpha=0.2, color="tab:blue",
                      label="95% interval")
    axes.plot(xs, [n.value for n in numbers], marker="o", color="tab:blue", label=name)
    axes.axhline(100, color="grey", linewidth=0.8, linestyle=":")
    bottom = min(n.low for n in numbers) if numbers else 100.0
    for r in regressions:
        if r.good is None or r.bad is None or r.good not in positions or r.bad not in positions:
            continue
        color = "tab:red" if r.kind == "regression" else "tab:green"
        axes.axvspan(positions[r.good], positions[r.bad], color=color, alpha=0.12)
        label = f"#{r.id} {r.change_pct:+.1f}%"
        at = positions[r.bad]
        if r.culprit and r.culprit in positions:
            at = positions[r.culprit]
            axes.axvline(at, color=color, linewidth=1.2)
            label += f" culprit {r.culprit[:12]}"
        elif r.culprits:
            label += f" culprit any of {r.culprits[0].sha[:8]}..{r.culprits[-1].sha[:8]}"
        axes.annotate(label, (at, bottom), fontsize=7, color=color, rotation=90, va="bottom", ha="right")
    style_axes(axes, title=f"{name}: the daily number (100 = first tested commit, higher is better)",
               xlabel="commit (first-parent position from `since`)", ylabel="number")
    save(figure, path)
