"""Runs as terminal tables and as JSON documents (the `--json` schema is part of the API)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from perfline.records.metric import Metric
from perfline.stats import Summary, summarize

if TYPE_CHECKING:
    from perfline.store import RunDetail, RunInfo

STATUS_STYLE = {"completed": "green", "running": "cyan", "failed": "red", "interrupted": "yellow"}


@dataclass(frozen=True)
class MetricSummary:
    metric: Metric
    source: str
    summary: Summary


def metric_summaries(detail: RunDetail) -> list[MetricSummary]:
    """One summary per metric, benchmark metrics first, in the order they were first seen."""
    values: dict[str, list[float]] = defaultdict(list)
    metrics: dict[str, tuple[Metric, str]] = {}
    for sample in detail.samples:
        values[sample.metric.name].append(sample.value)
        metrics.setdefault(sample.metric.name, (sample.metric, sample.source))
    rows = [MetricSummary(m, source, summarize(values[name])) for name, (m, source) in metrics.items()]
    return sorted(rows, key=lambda row: row.source != "benchmark")


def runs_table(runs: list[RunInfo]) -> Table:
    table = Table(title="perfline runs (newest first)", title_justify="left")
    for column in ("id", "job / case", "kernel", "label", "status", "samples", "started"):
        table.add_column(column, justify="right" if column in ("id", "samples") else "left")
    for run in runs:
        table.add_row(
            str(run.id),
            Text.assemble(f"{run.job} ", (run.case_key, "dim")),
            run.kernel_release,
            run.label or "",
            Text(run.status, style=STATUS_STYLE.get(run.status, "")),
            f"{run.samples}/{run.repeat}",
            _local(run.started_at),
        )
    return table


SUMMARY_COLUMNS = ("mean", "±stddev", "median", "min", "max", "n", "unit")
ARROWS = {"higher": " ↑", "lower": " ↓", "neutral": ""}


def _summary_cells(row: MetricSummary) -> list[str]:
    s = row.summary
    noise = f"{s.cv_pct:.1f}%" if s.mean else "-"
    unit = f"{row.metric.unit}{ARROWS[row.metric.direction.value]}"
    return [number(s.mean), noise, number(s.median), number(s.min), number(s.max), str(s.n), unit]


def _summary_columns(table: Table) -> None:
    for column in SUMMARY_COLUMNS:
        table.add_column(column, justify="left" if column == "unit" else "right", no_wrap=True)


def summary_table(title: str, rows: list[MetricSummary]) -> Table:
    table = Table(title=title, title_justify="left", caption=DIRECTION_CAPTION)
    table.add_column("metric", no_wrap=True)
    _summary_columns(table)
    for row in rows:
        table.add_row(row.metric.name, *_summary_cells(row))
    return table


DIRECTION_CAPTION = "↑ higher is better, ↓ lower is better; ±stddev is relative (%stddev)"


def results_table(details: list[RunDetail]) -> Table:
    """The benchmark metrics of several runs, one row per run and metric (after `run`)."""
    table = Table(title="results", title_justify="left", caption=DIRECTION_CAPTION)
    table.add_column("run", justify="right", no_wrap=True)
    table.add_column("case", overflow="fold")
    table.add_column("metric", no_wrap=True)
    _summary_columns(table)
    for detail in details:
        info = detail.info
        run = Text(str(info.id), style=STATUS_STYLE.get(info.status, ""))
        rows = [r for r in metric_summaries(detail) if r.source == "benchmark"]
        if not rows:
            table.add_row(run, info.case_key, Text(f"({info.status}, no samples)", style="red"))
        for row in rows:
            table.add_row(run, info.case_key, row.metric.name, *_summary_cells(row))
    return table


def run_view(detail: RunDetail) -> RenderableType:
    info = detail.info
    summaries = metric_summaries(detail)
    parts: list[RenderableType] = [
        Text.assemble(
            (f"run {info.id} ", "bold"),
            (info.status, STATUS_STYLE.get(info.status, "")),
            f"  {info.job} / {info.case_key}  on {info.hostname} ({info.kernel_release})"
            f"  {info.samples}/{info.repeat} repetitions",
        )
    ]
    if detail.error:
        parts.append(Text(f"error: {detail.error}", style="red"))
    if detail.output_tail:
        parts.append(Text(detail.output_tail, style="dim"))
    benchmark_rows = [r for r in summaries if r.source == "benchmark"]
    monitor_rows = [r for r in summaries if r.source == "monitor"]
    if benchmark_rows:
        parts.append(summary_table("results", benchmark_rows))
    if benchmark_rows:
        parts.append(samples_table(detail))
    if monitor_rows:
        parts.append(summary_table("monitors (per repetition)", monitor_rows))
    parts.append(fingerprint_table(detail))
    return Group(*parts)


def samples_table(detail: RunDetail) -> Table:
    by_rep: dict[int, dict[str, float]] = defaultdict(dict)
    names: list[str] = []
    for sample in detail.samples:
        if sample.source != "benchmark":
            continue
        by_rep[sample.repetition][sample.metric.name] = sample.value
        if sample.metric.name not in names:
            names.append(sample.metric.name)
    table = Table(title="samples", title_justify="left")
    table.add_column("rep", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for rep in sorted(by_rep):
        table.add_row(str(rep), *(number(by_rep[rep][n]) if n in by_rep[rep] else "" for n in names))
    return table


def fingerprint_table(detail: RunDetail) -> Table:
    fp = detail.fingerprint
    table = Table(title="fingerprint", title_justify="left", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    rows: list[tuple[str, Any]] = [
        ("kernel", f"{fp['kernel_release']} {fp['kernel_version']}"),
        ("commit / label", f"{detail.info.kernel_commit or '-'} / {detail.info.label or '-'}"),
        ("cmdline", fp["cmdline"]),
        ("config", f"{fp.get('config_source') or 'not available'} {fp.get('config_hash') or ''}"),
        ("cpu", f"{fp['cpu_count']} × {fp['cpu_model']} ({fp['arch']})"),
        ("memory", f"{fp['memory_bytes'] / 2**30:.1f} GiB"),
        ("governor", ", ".join(sorted(set(fp["governors"].values()))) or "no cpufreq"),
        *([("pinned to CPUs", fp["pin"])] if fp.get("pin") else []),
        ("load at start", " ".join(f"{x:.2f}" for x in fp["loadavg"])),
        ("params", _pairs(detail.params)),
        ("tunables", _pairs(detail.tunables) or "none"),
        ("settings", _pairs(detail.settings) or "none"),
    ]
    rows += [(k, v) for k, v in fp["sysctls"].items()]
    rows += [(k, v) for k, v in fp["sysfs"].items()]
    for key, value in rows:
        # Text, not markup: sysfs values such as "always [madvise] never" have brackets.
        table.add_row(key, Text(str(value)))
    return table


def run_info_json(info: RunInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "job": info.job,
        "benchmark": info.benchmark,
        "case": info.case_key,
        "target": info.target,
        "kernel_release": info.kernel_release,
        "hostname": info.hostname,
        "label": info.label,
        "kernel_commit": info.kernel_commit,
        "status": info.status,
        "repetitions": info.samples,
        "repeat": info.repeat,
        "started_at": info.started_at.isoformat(),
        "finished_at": info.finished_at.isoformat() if info.finished_at else None,
    }


def run_detail_json(detail: RunDetail) -> dict[str, Any]:
    return {
        **run_info_json(detail.info),
        "params": detail.params,
        "tunables": detail.tunables,
        "monitors": detail.monitors,
        "settings": detail.settings,
        "error": detail.error,
        "output_tail": detail.output_tail,
        "summary": {
            row.metric.name: {
                "source": row.source,
                "unit": row.metric.unit,
                "direction": row.metric.direction.value,
                "n": row.summary.n,
                "mean": row.summary.mean,
                "stddev": row.summary.stddev,
                "min": row.summary.min,
                "median": row.summary.median,
                "max": row.summary.max,
            }
            for row in metric_summaries(detail)
        },
        "samples": [
            {"repetition": s.repetition, "metric": s.metric.name, "source": s.source, "value": s.value}
            for s in detail.samples
        ],
        "fingerprint": detail.fingerprint,
    }


def number(value: float) -> str:
    if value == 0 or 0.01 <= abs(value) < 1e6:
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{value:.3e}"


def _pairs(mapping: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in mapping.items())


def _local(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")
