"""Comparison tables for the terminal, in the spirit of MMTests' compare-kernels and
LKP's `%stddev %change %stddev`, with a confidence interval on every change."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from perfline.analysis.comparison import CaseComparison, MetricRow
from perfline.records.fingerprint import Difference
from perfline.report.profile_shifts import chain_text, shift_json
from perfline.report.runs import ARROWS, number
from perfline.stats.profile_diff import ChainShift, Shift, SymbolShift
from perfline.stats.summary import Summary

if TYPE_CHECKING:
    from perfline.stats.two_sample import Comparison

VERDICT_STYLE = {"regression": "bold red", "improvement": "bold green", "changed": "yellow"}
# A config diff between two kernels can be thousands of options; show the first ones.
MAX_CONFIG_ROWS = 40


def comparison_view(comparison: CaseComparison) -> RenderableType:
    base = comparison.sides[0]
    parts: list[RenderableType] = [
        Text.assemble(
            (f"{comparison.benchmark} ", "bold"),
            comparison.case_key,
            ("  baseline: ", "dim"),
            base.name,
        )
    ]
    if comparison.cross_machine:
        parts.append(
            Text(
                "WARNING: the sides ran on different machines; the changes below measure "
                "the machines as much as the kernels",
                style="bold white on red",
            )
        )
    for source, title in (("benchmark", "results"), ("monitor", "monitors (system, per repetition)")):
        rows = [row for row in comparison.rows if row.source == source]
        shown = [row for row in rows if source == "benchmark" or not _all_zero(row)]
        if shown:
            parts.append(_table(title, comparison, shown))
        if len(shown) < len(rows):
            parts.append(Text(f"{len(rows) - len(shown)} monitor metrics are zero on every "
                              "side and not shown", style="dim"))
    for note in comparison.notes:
        parts.append(Text(note, style="yellow"))
    outliers = _outlier_notes(comparison)
    if outliers:
        parts.append(Text("outliers (shown, not dropped): " + "; ".join(outliers), style="yellow"))
    for side, shifts, chains in zip(comparison.sides[1:], comparison.profile_shifts, comparison.chain_shifts,
                                    strict=True):
        if shifts:
            parts.append(profile_table(f"{base.name} → {side.name}", shifts))
        if chains:
            parts.append(chain_table(f"{base.name} → {side.name}", chains))
    for side, diffs in zip(comparison.sides[1:], comparison.differences, strict=True):
        if side.runs:  # samples from a file (compare --csv) have no fingerprint
            parts.append(differences_table(f"{base.name} → {side.name}", diffs))
    return Group(*parts)


def profile_table(title: str, shifts: list[SymbolShift]) -> Table:
    table = _shift_table(f"profile: symbols whose share of busy CPU time moved most, {title}", "symbol")
    for shift in shifts:
        table.add_row(Text(shift.key.symbol), Text(shift.key.dso, style="dim"), *_shift_cells(shift))
    return table


def chain_table(title: str, shifts: list[ChainShift]) -> Table:
    table = _shift_table(f"profile: call chains whose share of busy CPU time moved most, {title}",
                         "chain (sampled function <- its callers)")
    for shift in shifts:
        table.add_row(Text(chain_text(shift.key.frames)), Text(shift.key.dso, style="dim"), *_shift_cells(shift))
    return table


def _shift_table(title: str, item: str) -> Table:
    table = Table(title=title, title_justify="left",
                  caption="95% CI of Δ from the profiled repetitions (runs, when a side has several)",
                  caption_justify="left")
    for column in (item, "binary", "baseline %", "other %", "Δ points", "95% CI"):
        table.add_column(column, justify="left" if column in (item, "binary") else "right")
    return table


def _shift_cells(shift: Shift[Any]) -> list[str | Text]:
    style = "red" if shift.delta_pct > 0 else "green"
    ci = f"[{shift.ci_pct[0]:+.2f}, {shift.ci_pct[1]:+.2f}]" if shift.ci_pct else ""
    return [f"{shift.base_pct:.2f}", f"{shift.other_pct:.2f}", Text(f"{shift.delta_pct:+.2f}", style=style), ci]


def _table(title: str, comparison: CaseComparison, rows: list[MetricRow]) -> Table:
    level = f"{100 * comparison.confidence:.4g}% CI"
    caption = (
        f"mean ±%stddev (n); %change with its {level}; * significant: p < {comparison.alpha:.2g} and "
        "beyond the practical floor"
    )
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    table.add_column("metric", no_wrap=True)
    table.add_column(comparison.sides[0].name, justify="right", no_wrap=True)
    for side in comparison.sides[1:]:
        table.add_column(side.name, justify="right", no_wrap=True)
        table.add_column(f"%change [{level}]", justify="right", no_wrap=True)
        table.add_column("p", justify="right", no_wrap=True)
        table.add_column("", no_wrap=True, min_width=11)
    for row in rows:
        unit = f"{row.metric.unit}{ARROWS[row.metric.direction.value]}"
        cells: list[str | Text] = [Text.assemble(row.metric.name, (f" {unit}", "dim")), _mean(row.base)]
        for other in row.others:
            cells += _change_cells(other)
        table.add_row(*cells)
    return table


def _change_cells(comparison: Comparison | None) -> list[str | Text]:
    if comparison is None:
        return ["-", "", "", ""]
    low, high = comparison.ci_pct
    marker = "*" if comparison.significant else " "
    if math.isfinite(comparison.change_pct) and math.isfinite(low) and math.isfinite(high):
        change = f"{comparison.change_pct:+.1f}% [{low:+.1f}, {high:+.1f}]{marker}"
    else:  # a baseline mean of zero has no relative change
        change = "n/a "
    verdict = comparison.verdict
    if comparison.more_samples is not None:
        verdict += f" (+{comparison.more_samples} {comparison.unit})"
    style = VERDICT_STYLE.get(comparison.verdict, "dim") if comparison.significant else "dim"
    return [
        _mean(comparison.other),
        Text(change, style=style if comparison.significant else ""),
        f"{comparison.p_value:.2g}",
        Text(verdict, style=style),
    ]


def _all_zero(row: MetricRow) -> bool:
    summaries = [row.base] + [c.other for c in row.others if c is not None]
    return all(s.min == 0 and s.max == 0 for s in summaries)


def _mean(summary: Summary) -> str:
    noise = f"{summary.cv_pct:.1f}%" if summary.mean else "-"
    return f"{number(summary.mean)} ±{noise} ({summary.n})"


def _outlier_notes(comparison: CaseComparison) -> list[str]:
    notes = []
    for row in comparison.rows:
        if row.source != "benchmark":
            continue
        for side, other in zip(comparison.sides[1:], row.others, strict=True):
            if other is None:
                continue
            for name, indexes in ((comparison.sides[0].name, other.outliers_base),
                                  (side.name, other.outliers_other)):
                if indexes:
                    notes.append(f"{row.metric.name} {name} samples {list(indexes)}")
    return sorted(set(notes))


def differences_table(title: str, diffs: list[Difference]) -> RenderableType:
    if not diffs:
        return Text(f"fingerprints {title}: identical", style="green")
    table = Table(title=f"fingerprint differences {title}", title_justify="left")
    for column in ("what", "", "baseline", "other"):
        table.add_column(column, overflow="fold")
    configs = [d for d in diffs if d.kind == "config"]
    shown = [d for d in diffs if d.kind != "config"] + configs[:MAX_CONFIG_ROWS]
    for diff in shown:
        style = "bold red" if diff.kind == "machine" else ("yellow" if diff.kind == "kernel" else "")
        table.add_row(Text(diff.key, style=style), diff.kind, Text(diff.base), Text(diff.other))
    if len(configs) > MAX_CONFIG_ROWS:
        table.add_row(f"… {len(configs) - MAX_CONFIG_ROWS} more config options", "config", "", "")
    return table


def comparison_json(comparison: CaseComparison) -> dict[str, Any]:
    """The `compare --json` / `ab --json` document for one case (a stable schema)."""

    def summary(s: Summary) -> dict[str, float | int]:
        return {"mean": s.mean, "stddev": s.stddev, "cv_pct": s.cv_pct, "n": s.n,
                "min": s.min, "median": s.median, "max": s.max}

    return {
        "benchmark": comparison.benchmark,
        "case": comparison.case_key,
        "sides": [{"name": s.name, "runs": [r.info.id for r in s.runs]} for s in comparison.sides],
        "cross_machine": comparison.cross_machine,
        "metrics": [
            {
                "metric": row.metric.name,
                "unit": row.metric.unit,
                "direction": row.metric.direction.value,
                "source": row.source,
                "base": summary(row.base),
                "others": [
                    None if c is None else {
                        **summary(c.other),
                        "change_pct": c.change_pct,
                        "ci_pct": list(c.ci_pct),
                        "p_value": c.p_value,
                        "p_value_rank": c.p_value_rank,
                        "significant": c.significant,
                        "verdict": c.verdict,
                        "floor_pct": c.floor_pct,
                        "unit": c.unit,
                        "more_samples": c.more_samples,
                        "outliers_base": list(c.outliers_base),
                        "outliers_other": list(c.outliers_other),
                    }
                    for c in row.others
                ],
            }
            for row in comparison.rows
        ],
        "differences": [
            [{"key": d.key, "base": d.base, "other": d.other, "kind": d.kind} for d in diffs]
            for diffs in comparison.differences
        ],
        "profile_shifts": [[shift_json(shift) for shift in shifts] for shifts in comparison.profile_shifts],
        "chain_shifts": [[shift_json(shift) for shift in shifts] for shifts in comparison.chain_shifts],
        "notes": comparison.notes,
    }
