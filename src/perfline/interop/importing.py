"""From files to stored runs: find the files, detect each format, read everything, then
store it all in one transaction (or print what would be stored, `--dry-run`).

An imported run is an ordinary run (it takes part in history, detect, compare, track
and the dashboard) with target `imported` and the settings `imported` (format, file,
content hash: the same file is not imported twice without --force) and, for summary-
only metrics, `summary_only` (mean, stddev, n as the file gave them; compare says so).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfline import __version__
from perfline.interop import perfline_json
from perfline.interop.formats import ASV_METADATA, IMPORTERS, detect
from perfline.interop.jsonfile import read_bytes
from perfline.interop.model import ImportedRun, ImportFailed
from perfline.interop.otava import OtavaColumns, otava
from perfline.records.job import Case
from perfline.records.metric import Direction, Metric
from perfline.records.status import RunStatus
from perfline.store.imports import NewRun

FORMATS = (*IMPORTERS, "perfline")
SUFFIXES = (".json", ".csv", ".xml")


@dataclass
class ImportPlan:
    format: str
    runs: list[NewRun] = field(default_factory=list)
    skipped: int = 0  # values that were not numbers (NaN, Infinity, null)
    files: list[Path] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    # perfline exports, one per file: stored file by file (their regressions name runs
    # by position in their own file).
    exports: list[perfline_json.Export] = field(default_factory=list)

    @property
    def samples(self) -> int:
        return sum(len(r.samples) for r in self.runs)


def files_of(path: Path) -> list[Path]:
    """The files to read: the file, or a directory's .json and .csv files; in a
    Criterion.rs tree (a benchmark's directory, its `new/`, or `target/criterion`) each
    benchmark's new/sample.json."""
    if path.is_dir():
        samples = sorted(p for p in path.rglob("sample.json") if p.parent.name == "new")
        if (path / "sample.json").is_file() and path.name == "new":
            samples = [path / "sample.json"]
        if samples:
            return samples
        # asv's machine.json and benchmarks.json describe its results; they hold none.
        found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES
                       and p.name not in ASV_METADATA)
        if not found:
            raise ImportFailed(path, "no .json or .csv file in this directory")
        return found
    if not path.exists():
        raise ImportFailed(path, "no such file or directory")
    return [path]


def plan(path: Path, fmt: str | None, *, label: str | None, machine: str | None, commit: str | None,
         commit_from_file: bool, directions: dict[str, str], columns: OtavaColumns | None = None) -> ImportPlan:
    """`columns`: an Otava CSV's metric and attribute columns, when the user names them."""
    files = files_of(path)
    formats = {f: fmt or detect(f) for f in files}
    kinds = set(formats.values())
    if len(kinds) > 1:
        raise ImportFailed(path, f"holds files of several formats ({', '.join(sorted(kinds))}); import them one by "
                                 "one or give --format")
    chosen = kinds.pop()
    if chosen not in FORMATS:
        raise ImportFailed(path, f"unknown format {chosen!r}: one of {', '.join(FORMATS)}")
    if columns is not None and chosen != "otava":
        raise ImportFailed(path, f"--metrics and --attributes name an Otava CSV's columns; this is {chosen}")
    out = ImportPlan(chosen)
    for file in files:
        # Capped: a 2 GB file was read whole and hashed (26 s) before its importer refused it.
        digest = hashlib.sha256(read_bytes(file)).hexdigest()
        out.files.append(file)
        out.digests.append(digest)
        if chosen == "perfline":
            export = perfline_json.read(file)
            out.exports.append(export)
            out.runs += export.runs
            continue
        runs, skipped = otava(file, columns) if chosen == "otava" else IMPORTERS[chosen](file)
        out.skipped += skipped
        source = {"format": chosen, "file": str(file.resolve()), "sha256": digest}
        for run in runs:
            out.runs.append(_new_run(run, chosen, source, label, machine, commit if not commit_from_file else
                                     run.commit, directions))
    return out


def _new_run(run: ImportedRun, fmt: str, source: dict[str, str], label: str | None, machine: str | None,
             commit: str | None, directions: dict[str, str]) -> NewRun:
    host = machine or run.hostname or "imported"
    machine_id = hashlib.sha256(f"imported:{host}".encode()).hexdigest()[:32]
    # In UTC, as everything perfline stores (SQLite keeps the wall time and drops the offset).
    started = run.started_at.astimezone(UTC) if run.started_at and run.started_at.tzinfo else \
        (run.started_at.replace(tzinfo=UTC) if run.started_at else datetime.now(UTC))
    case = Case(job=f"import:{fmt}", benchmark=run.benchmark, params=dict(run.params), tunables={}, repeat=1,
                warmup=0, monitors=(), target="imported")
    fingerprint: dict[str, Any] = {
        "hostname": host, "machine_id": machine_id, "boot_id": "imported", "arch": run.facts.get("machine", ""),
        "kernel_release": run.facts.get("release", ""), "kernel_version": "", "cmdline": "",
        "cpu_model": run.facts.get("processor", ""), "cpu_count": int(run.facts.get("num_cpus", "0") or 0),
        "memory_bytes": 0, "governors": {}, "loadavg": [0.0, 0.0, 0.0], "sysctls": {}, "sysfs": {},
        "target": "imported", "imported_facts": run.facts,
    }
    settings: dict[str, Any] = {"imported": source}
    samples = []
    now = datetime.now(UTC)
    for m in run.metrics:
        direction = Direction(directions[m.name]) if m.name in directions else m.direction
        metric = Metric(m.name, m.unit, direction)
        samples += [(rep, metric, "benchmark", value, now) for rep, value in enumerate(m.values)]
        if m.summary_only is not None:
            settings.setdefault("summary_only", {})[m.name] = m.summary_only
    columns = {
        "job": case.job, "benchmark": case.benchmark, "case_key": case.key, "params": dict(run.params),
        "tunables": {}, "monitors": [], "target": "imported", "label": label or run.label,
        "kernel_commit": commit,
        "hostname": host, "machine_id": machine_id, "kernel_release": fingerprint["kernel_release"],
        "fingerprint": fingerprint, "config_hash": None, "settings": settings, "status": RunStatus.COMPLETED.value,
        "error": None, "output_tail": None, "repeat": max((len(m.values) for m in run.metrics), default=0),
        "warmup": 0, "started_at": started, "finished_at": started, "pid": 0, "boot_id": "imported",
        "perfline_version": __version__,
    }
    return NewRun(columns, samples)
