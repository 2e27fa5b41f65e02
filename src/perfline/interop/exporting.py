"""`perfline export`: the selected runs as perfline's lossless JSON, long-form CSV,
Bencher Metric Format or an Otava CSV."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from datetime import datetime
from typing import Any

from perfline.interop.perfline_json import document
from perfline.store import Store

FORMATS = ("perfline", "csv", "bmf", "otava")
CSV_COLUMNS = ("run", "label", "benchmark", "case", "metric", "unit", "direction", "repetition", "value", "commit",
               "started_at")


def export(store: Store, fmt: str, run_ids: list[int] | None = None, label: str | None = None,
           since: datetime | None = None) -> str:
    runs, metrics, configs, regressions = store.export_runs(run_ids, label, since)
    if fmt == "perfline":
        listed = [{"name": m.name, "unit": m.unit, "direction": m.direction.value, "description": m.description}
                  for m in metrics]
        return json.dumps(document(runs, listed, configs, regressions), indent=1, sort_keys=True) + "\n"
    units = {m.name: m for m in metrics}
    benchmark_samples = [(i, run, s) for i, run in enumerate(runs) for s in run["samples"] if s[2] == "benchmark"]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for i, run, (rep, name, _, value, _) in benchmark_samples:
            writer.writerow([i, run["label"] or "", run["benchmark"], run["case_key"], name, units[name].unit,
                             units[name].direction.value, rep, repr(value), run["kernel_commit"] or "",
                             run["started_at"]])
        return out.getvalue()
    means: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i, _, (_, name, _, value, _) in benchmark_samples:
        means[i][name].append(value)
    if fmt == "bmf":
        # BMF keys benchmarks by name; one run per benchmark and case (the newest wins).
        doc: dict[str, dict[str, dict[str, float]]] = {}
        for i, run in enumerate(runs):
            name = f"{run['benchmark']}:{run['case_key']}"
            doc[name] = {metric: {"value": sum(v) / len(v), "lower_value": min(v), "upper_value": max(v)}
                         for metric, v in means[i].items()}
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"
    # Otava: one row per run, a time and commit column, one column per metric (its mean).
    names = sorted({name for per_run in means.values() for name in per_run})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["time", "commit", *names])
    for i, run in enumerate(runs):
        started = datetime.fromisoformat(run["started_at"])
        row: list[Any] = [started.strftime("%Y.%m.%d %H:%M:%S %z"), run["kernel_commit"] or ""]
        row += [repr(sum(means[i][n]) / len(means[i][n])) if means[i].get(n) else "" for n in names]
        writer.writerow(row)
    return out.getvalue()
