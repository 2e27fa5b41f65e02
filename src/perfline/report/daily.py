"""The morning summary of every tracker: its number, what was tested, what changed,
what waits. Text for the terminal and mail, HTML with each tracker's graph inline."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime

from perfline.report.regressions import culprit_range
from perfline.report.templates import TEMPLATES
from perfline.report.tracking import TrackerState
from perfline.store import Regression
from perfline.store.trackers import DailyNumber


@dataclass(frozen=True)
class TrackerDay:
    state: TrackerState
    tested: list[DailyNumber]  # commits tested since the last summary
    regressions: list[Regression]  # the tracker's records that changed since then
    graph_png: bytes | None

    @property
    def graph(self) -> str | None:
        return base64.b64encode(self.graph_png).decode() if self.graph_png else None


@dataclass(frozen=True)
class DailySummary:
    since: datetime
    days: list[TrackerDay]

    @property
    def subject(self) -> str:
        new = sum(r.status == "new" and r.kind == "regression" for d in self.days for r in d.regressions)
        bisected = sum(r.status == "bisected" for d in self.days for r in d.regressions)
        names = ", ".join(d.state.tracker.name for d in self.days) or "no trackers"
        return f"[perfline] daily: {names}: {new} new regression(s), {bisected} bisected"


def line(r: Regression) -> str:
    """One regression in one line: what, how much, where, how far it got."""
    where = f"{r.good[:12]}..{r.bad[:12]}" if r.good and r.bad else f"runs {r.before_run_id}..{r.after_run_id}"
    culprit = f", culprit {r.culprit[:12]} {r.culprit_subject}" if r.culprit else (
        f", culprit {culprit_range(r)}" if r.culprits else "")
    return f"#{r.id} {r.status:<11} {r.kind:<11} {r.metric} {r.change_pct:+.1f}% in {where}{culprit}"


def text(summary: DailySummary) -> str:
    out = [f"Subject: {summary.subject}", "", f"since {summary.since.astimezone():%Y-%m-%d %H:%M %Z}", ""]
    for day in summary.days:
        s = day.state
        latest = s.numbers[-1] if s.numbers else None
        number = "-" if latest is None else f"{latest.value:.1f} [{latest.low:.1f}, {latest.high:.1f}]"
        out.append(f"{s.tracker.name} ({s.tracker.branch}, head {(s.tracker.head or '-')[:12]}): number {number}")
        out.append(f"  tested since: {len(day.tested)} commit(s); {s.tested} tested in all, {s.pending} pending, "
                   f"{s.open_regressions} open regression(s), {s.budget_left} runs left today")
        for n in day.tested:
            out.append(f"    {n.commit[:12]} {n.value:6.1f} [{n.low:.1f}, {n.high:.1f}]  {n.subject}")
        out += [f"  {line(r)}" for r in day.regressions] or ["  no regression or improvement changed"]
        out.append("")
    if not summary.days:
        out.append("no trackers: `perfline track run FILE` starts one")
    return "\n".join(out).rstrip() + "\n"


def html(summary: DailySummary) -> str:
    return TEMPLATES.get_template("daily.html").render(summary=summary, line=line)
