"""perfline's own export: every column of the runs, their samples, the metrics, the
kernel configs and the regressions between exported runs; lossless, so that
export -> import -> export gives the same bytes (runs are referred to by their position
in the file, never by an id of the store they came from)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from perfline.interop.jsonfile import load, need
from perfline.interop.model import ImportFailed
from perfline.records.metric import Direction, Metric
from perfline.store.imports import NewRun

VERSION = 1
_TIMES = ("started_at", "finished_at")


def document(runs: list[dict[str, Any]], metrics: list[dict[str, Any]], configs: dict[str, dict[str, str]],
             regressions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"perfline_export": VERSION, "metrics": metrics, "kernel_configs": configs, "runs": runs,
            "regressions": regressions}


@dataclass(frozen=True)
class Export:
    """One export file: its runs in order, the kernel configs they name, and the
    regressions between them (runs by position)."""

    runs: list[NewRun]
    configs: dict[str, dict[str, str]]
    regressions: list[dict[str, Any]]


def read(path: Path) -> Export:
    doc = need(path, load(path), dict, "the file")
    if doc.get("perfline_export") != VERSION:
        raise ImportFailed(path, f"perfline_export is {doc.get('perfline_export')!r}; this perfline reads {VERSION}")
    metrics = {}
    for i, m in enumerate(need(path, doc.get("metrics"), list, "metrics")):
        m = need(path, m, dict, f"metrics[{i}]")
        try:
            metrics[m["name"]] = Metric(str(m["name"]), str(m["unit"]), Direction(m["direction"]),
                                        str(m.get("description", "")))
        except (KeyError, ValueError) as exc:
            raise ImportFailed(path, f"metrics[{i}]: {exc}") from None
    out = []
    for i, run in enumerate(need(path, doc.get("runs"), list, "runs")):
        run = dict(need(path, run, dict, f"runs[{i}]"))
        samples = need(path, run.pop("samples", None), list, f"runs[{i}].samples")
        try:
            for key in _TIMES:
                run[key] = datetime.fromisoformat(run[key]) if run.get(key) else None
            rows = [(int(rep), metrics[name], str(source), float(value), datetime.fromisoformat(taken))
                    for rep, name, source, value, taken in samples]
        except (KeyError, ValueError, TypeError) as exc:
            raise ImportFailed(path, f"runs[{i}]: {exc!r}") from None
        out.append(NewRun(run, rows))
    configs = need(path, doc.get("kernel_configs") or {}, dict, "kernel_configs")
    regressions = need(path, doc.get("regressions") or [], list, "regressions")
    return Export(out, configs, regressions)
