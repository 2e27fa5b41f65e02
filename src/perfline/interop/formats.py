"""The importers, one function per format: a file (or directory) in, ImportedRuns out.

Units and directions: a format that says (hyperfine and Google Benchmark times are
lower-is-better, a `*_per_second` counter higher) is followed; where it does not, the
default is lower-is-better and `--direction METRIC=higher` sets it (docs/interop.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from perfline.interop.jsonfile import load, need, read_text
from perfline.interop.model import TIME_UNITS, ImportedMetric, ImportedRun, ImportFailed, finite
from perfline.interop.otava import otava
from perfline.records.metric import Direction

Importer = Callable[[Path], tuple[list[ImportedRun], int]]  # runs, values skipped


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


# ---- Google Benchmark ---------------------------------------------------------------


def gbench(path: Path) -> tuple[list[ImportedRun], int]:
    """Iteration rows are samples (repetitions of one name are one run); aggregate rows
    (mean, median, stddev, BigO, RMS) are not. Times go to seconds; user counters become
    metrics (per-second ones higher-is-better)."""
    doc = need(path, load(path), dict, "the file")
    context = need(path, doc.get("context", {}), dict, "context")
    rows = need(path, doc.get("benchmarks"), list, "benchmarks")
    runs: dict[str, ImportedRun] = {}
    values: dict[str, dict[str, list[float]]] = {}
    units: dict[str, str] = {}
    skipped = 0
    for i, row in enumerate(rows):
        row = need(path, row, dict, f"benchmarks[{i}]")
        if row.get("run_type", "iteration") != "iteration" or "aggregate_name" in row:
            continue
        name = str(row.get("run_name") or row.get("name") or f"row{i}")
        if "real_time" not in row:
            continue
        unit = row.get("time_unit", "ns")
        if unit not in TIME_UNITS:
            raise ImportFailed(path, f"benchmarks[{i}].time_unit: unknown unit {unit!r}")
        runs.setdefault(name, ImportedRun("gbench", {"name": name}, started_at=_time(context.get("date")),
                                                 hostname=context.get("host_name"),
                                                 facts={k: str(context[k]) for k in ("num_cpus", "mhz_per_cpu",
                                                        "library_version", "executable") if k in context}))
        metrics = values.setdefault(name, {})
        for key in ("real_time", "cpu_time"):
            if key in row:
                kept, bad = finite([need(path, row[key], (int, float), f"benchmarks[{i}].{key}")])
                skipped += bad
                metrics.setdefault(f"gbench.{key}", []).extend(v * TIME_UNITS[unit] for v in kept)
                units[f"gbench.{key}"] = "s"
        for key, value in row.items():
            if key.endswith("_per_second") or key in ("items_per_second", "bytes_per_second") or (
                    key not in _GBENCH_KEYS and isinstance(value, int | float) and not isinstance(value, bool)):
                kept, bad = finite([value])
                skipped += bad
                metrics.setdefault(f"gbench.{key}", []).extend(kept)
                units.setdefault(f"gbench.{key}", "/s" if key.endswith("_per_second") else "")
    out = []
    for name, run in runs.items():
        for metric, kept in values[name].items():
            higher = metric.endswith("_per_second")
            run.metrics.append(ImportedMetric(metric, units[metric], Direction.HIGHER if higher else Direction.LOWER,
                                              kept))
        out.append(run)
    return out, skipped


_GBENCH_KEYS = {"name", "run_name", "run_type", "family_index", "per_family_instance_index", "repetitions",
                "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit", "label",
                "aggregate_name", "aggregate_unit", "error_occurred", "error_message", "big_o", "rms"}


# ---- hyperfine ----------------------------------------------------------------------


def hyperfine(path: Path) -> tuple[list[ImportedRun], int]:
    """Each command a case; `times` (seconds) the samples, user and system time beside."""
    doc = need(path, load(path), dict, "the file")
    results = need(path, doc.get("results"), list, "results")
    runs, skipped = [], 0
    for i, result in enumerate(results):
        result = need(path, result, dict, f"results[{i}]")
        command = str(need(path, result.get("command"), str, f"results[{i}].command"))
        times = need(path, result.get("times"), list, f"results[{i}].times")
        kept, bad = finite(times)
        skipped += bad
        params: dict[str, str | int | float | bool] = {"command": command}
        for key, value in (result.get("parameters") or {}).items():
            params[str(key)] = str(value)
        run = ImportedRun("hyperfine", params)
        run.metrics.append(ImportedMetric("hyperfine.wall_time", "s", Direction.LOWER, kept))
        for key in ("user", "system"):
            if isinstance(result.get(key), int | float):
                run.metrics.append(ImportedMetric(f"hyperfine.{key}_time", "s", Direction.LOWER,
                                                  [float(result[key])], {"mean": float(result[key])}))
        runs.append(run)
    return runs, skipped


# ---- pytest-benchmark ---------------------------------------------------------------


def pytest_benchmark(path: Path) -> tuple[list[ImportedRun], int]:
    """Saved runs: the raw per-round `data` when present, else the stats (summary only)."""
    doc = need(path, load(path), dict, "the file")
    benchmarks = need(path, doc.get("benchmarks"), list, "benchmarks")
    commit = (doc.get("commit_info") or {}).get("id")
    machine = doc.get("machine_info") or {}
    started = _time(doc.get("datetime"))
    runs, skipped = [], 0
    for i, bench in enumerate(benchmarks):
        bench = need(path, bench, dict, f"benchmarks[{i}]")
        stats = need(path, bench.get("stats"), dict, f"benchmarks[{i}].stats")
        name = str(bench.get("fullname") or bench.get("name") or f"benchmark{i}")
        params: dict[str, str | int | float | bool] = {"name": name}
        for key, value in (bench.get("params") or {}).items():
            params[str(key)] = str(value)
        run = ImportedRun("pytest-benchmark", params, started_at=started, hostname=machine.get("node"),
                          commit=commit if isinstance(commit, str) else None,
                          facts={k: str(machine[k]) for k in ("processor", "machine", "system", "release",
                                                              "python_version") if k in machine})
        data = stats.get("data")
        if isinstance(data, list):
            kept, bad = finite(data)
            skipped += bad
            run.metrics.append(ImportedMetric("pytest-benchmark.time", "s", Direction.LOWER, kept))
        else:
            mean = need(path, stats.get("mean"), (int, float), f"benchmarks[{i}].stats.mean")
            summary = {k: float(stats[k]) for k in ("mean", "stddev", "min", "max", "median")
                       if isinstance(stats.get(k), int | float)}
            summary["n"] = float(stats.get("rounds", 1))
            run.metrics.append(ImportedMetric("pytest-benchmark.time", "s", Direction.LOWER, [float(mean)], summary))
        runs.append(run)
    return runs, skipped


# ---- Bencher Metric Format ----------------------------------------------------------


def bmf(path: Path) -> tuple[list[ImportedRun], int]:
    """{benchmark: {measure: {value, lower_value, upper_value}}}: one value a measure (a
    summary: BMF carries no samples)."""
    doc = need(path, load(path), dict, "the file")
    runs, skipped = [], 0
    for name, measures in doc.items():
        measures = need(path, measures, dict, f"{name}")
        run = ImportedRun("bmf", {"name": str(name)})
        for measure, body in measures.items():
            body = need(path, body, dict, f"{name}.{measure}")
            value = need(path, body.get("value"), (int, float), f"{name}.{measure}.value")
            kept, bad = finite([value])
            skipped += bad
            if kept:
                summary = {"mean": kept[0], **{k: float(body[k]) for k in ("lower_value", "upper_value")
                                               if isinstance(body.get(k), int | float)}}
                run.metrics.append(ImportedMetric(f"bmf.{measure}", "", Direction.LOWER, kept, summary))
        runs.append(run)
    return runs, skipped


# ---- LKP-tests ----------------------------------------------------------------------


def lkp(path: Path) -> tuple[list[ImportedRun], int]:
    """A result directory's stats.json (one value a stat) or matrix.json (each stat's
    array: its values as repetitions; `*.time` keys are timestamps, not metrics)."""
    doc = need(path, load(path), dict, "the file")
    run = ImportedRun("lkp", {"result": path.parent.name or "lkp"})
    skipped = 0
    for key, value in sorted(doc.items()):
        if key.endswith(".time") or key.endswith(".timestamp"):
            continue
        values = value if isinstance(value, list) else [value]
        kept, bad = finite(values)
        skipped += bad
        if kept:
            higher = any(word in key for word in ("throughput", "ops", "per_sec", "bandwidth", "score"))
            run.metrics.append(ImportedMetric(key, "", Direction.HIGHER if higher else Direction.LOWER, kept))
    return [run], skipped


# ---- Criterion.rs -------------------------------------------------------------------


def criterion(path: Path) -> tuple[list[ImportedRun], int]:
    """One benchmark's `new/sample.json` (with `benchmark.json` beside it): each sample's
    time divided by its iterations, in seconds. Old (criterion 0.2: a pair of arrays)
    and current (`{"iters", "times"}`) spellings."""
    doc = load(path)
    if isinstance(doc, list) and len(doc) == 2:
        iters, times = doc
    else:
        doc = need(path, doc, dict, "the file")
        iters, times = doc.get("iters"), doc.get("times")
    iters = need(path, iters, list, "iters")
    times = need(path, times, list, "times")
    if len(iters) != len(times):
        raise ImportFailed(path, f"{len(iters)} iteration counts but {len(times)} times")
    info_path = path.parent / "benchmark.json"
    info = load(info_path) if info_path.is_file() else {}
    info = need(info_path, info, dict, "benchmark.json")
    name = str(info.get("full_id") or info.get("title") or path.parent.parent.name)
    params: dict[str, str | int | float | bool] = {"name": name}
    for key in ("group_id", "function_id", "value_str"):
        if isinstance(info.get(key), str):
            params[key] = info[key]
    per_iteration = []
    skipped = 0
    for n, t in zip(iters, times, strict=True):
        if isinstance(n, int | float) and isinstance(t, int | float) and n > 0:
            per_iteration.append(t / n * 1e-9)
        else:
            skipped += 1
    kept, bad = finite(per_iteration)
    run = ImportedRun("criterion", params)
    run.metrics.append(ImportedMetric("criterion.time", "s", Direction.LOWER, kept))
    return [run], skipped + bad


# ---- asv ----------------------------------------------------------------------------

ASV_METADATA = ("machine.json", "benchmarks.json")
_ASV_UNITS = {"seconds": "s", "bytes": "B", "unit": ""}


def asv(path: Path) -> tuple[list[ImportedRun], int]:
    """One results file (results version 1 or 2) of an asv results directory: each
    benchmark (each parameter combination of a parameterised one) a run at the file's
    commit and date. asv keeps one number per benchmark (the median of its repeats):
    stored as a summary with its interval and quartiles, unless the file has samples.
    Units and types from the benchmarks.json above it; null and NaN results skipped."""
    import itertools

    doc = need(path, load(path), dict, "the file")
    results = need(path, doc.get("results"), dict, "results")
    machine = doc.get("params") or {}
    started = None
    if isinstance(doc.get("date"), int | float):
        from datetime import UTC

        try:
            started = datetime.fromtimestamp(doc["date"] / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            raise ImportFailed(path, f"date {doc['date']}: not milliseconds since the epoch") from None
    commit = doc.get("commit_hash") if isinstance(doc.get("commit_hash"), str) else None
    described = _asv_benchmarks(path)
    columns = doc.get("result_columns") if doc.get("version") == 2 else None
    runs, skipped = [], 0
    for name, entry in results.items():
        stats: dict[str, Any] = {}
        samples = None
        if columns is not None:
            row = dict(zip(columns, need(path, entry, list, f"results.{name}"), strict=False))
            values, params = row.get("result"), row.get("params") or []
            stats = {k: row[k] for k in ("stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75")
                     if isinstance(row.get(k), list)}
            samples = row.get("samples")
        elif isinstance(entry, dict):
            values, params = entry.get("result"), entry.get("params") or []
            if isinstance(entry.get("stats"), list):
                stats = {"stats": entry["stats"]}
        else:
            values, params = [entry], []
        values = values if isinstance(values, list) else [values]
        combos = list(itertools.product(*params)) if params else [()]
        info = described.get(name, {})
        unit = _ASV_UNITS.get(str(info.get("unit", "seconds")), str(info.get("unit", "")))
        for i, combo in enumerate(combos):
            value = values[i] if i < len(values) else None
            raw = samples[i] if isinstance(samples, list) and i < len(samples) and isinstance(samples[i], list) \
                else None
            kept, bad = finite(raw if raw is not None else [value])
            skipped += bad
            if not kept:
                continue
            case: dict[str, str | int | float | bool] = {"name": name}
            case.update({f"p{j}": str(v) for j, v in enumerate(combo)})
            if doc.get("env_name"):
                case["env"] = str(doc["env_name"])
            summary = None
            if raw is None:
                summary = {"mean": kept[0]}
                summary.update({key: float(v[i]) for key, v in stats.items()
                                if i < len(v) and isinstance(v[i], int | float)})
            run = ImportedRun("asv", case, started_at=started, hostname=machine.get("machine"), commit=commit,
                              facts={k: str(machine[k]) for k in ("cpu", "os", "arch", "ram", "num_cpu")
                                     if k in machine})
            run.facts["processor"] = run.facts.get("cpu", "")
            run.metrics.append(ImportedMetric(f"asv.{name}", unit, Direction.LOWER, kept, summary))
            runs.append(run)
    return runs, skipped


def _asv_benchmarks(path: Path) -> dict[str, Any]:
    """benchmarks.json of the results directory (beside the machine directories)."""
    for where in (path.parent, path.parent.parent):
        found = where / "benchmarks.json"
        if found.is_file():
            doc = load(found)
            return doc if isinstance(doc, dict) else {}
    return {}


# ---- Phoronix Test Suite ------------------------------------------------------------


def pts(path: Path) -> tuple[list[ImportedRun], int]:
    """composite.xml: each Result's Entry a run of its system (the Entry's Identifier),
    the per-run values of its RawString the samples (its Value a summary when the
    RawString is empty); the unit is the Scale, HIB higher and LIB lower is better; the
    System table (processor, memory, OS, kernel) is the run's fingerprint.

    A DOCTYPE is refused before parsing: result files have none, and entity
    declarations are how an XML bomb expands."""
    import xml.etree.ElementTree as ElementTree

    text = read_text(path)
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        first = min(i for i in (text.find("<!DOCTYPE"), text.find("<!ENTITY")) if i >= 0)
        line = text[:first].count("\n") + 1
        raise ImportFailed(path, "a DOCTYPE or ENTITY declaration: composite.xml has none (refused: an XML bomb "
                                 "expands through them)", line)
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise ImportFailed(path, f"not valid XML: {exc}", exc.position[0]) from None
    if root.tag != "PhoronixTestSuite":
        raise ImportFailed(path, f"the root element is <{root.tag}>, not <PhoronixTestSuite>")
    systems = {}
    for system in root.iter("System"):
        ident = (system.findtext("Identifier") or "").strip()
        facts = {}
        for part in ((system.findtext("Hardware") or "") + ", " + (system.findtext("Software") or "")).split(", "):
            key, _, value = part.partition(": ")
            if value:
                facts[key.strip()] = value.strip()
        systems[ident] = (facts, _time((system.findtext("TimeStamp") or "").replace(" ", "T")))
    runs, skipped = [], 0
    for number, result in enumerate(root.iter("Result"), start=1):
        test = (result.findtext("Identifier") or "").strip() or (result.findtext("Title") or "").strip() \
            or f"result{number}"
        scale = (result.findtext("Scale") or "").strip()
        higher = (result.findtext("Proportion") or "").strip().upper() == "HIB"
        params: dict[str, str | int | float | bool] = {"test": test}
        for key in ("Title", "Arguments", "Description"):
            if (value := (result.findtext(key) or "").strip()):
                params[key.lower()] = value
        for entry in result.iter("Entry"):
            ident = (entry.findtext("Identifier") or "").strip()
            facts, started = systems.get(ident, ({}, None))
            raw = [v for v in (entry.findtext("RawString") or "").split(":") if v.strip()]
            summary = None
            try:
                values = [float(v) for v in raw]
                if not values:
                    values = [float((entry.findtext("Value") or "").strip())]
                    summary = {"mean": values[0]}
            except ValueError:
                skipped += 1
                continue
            kept, bad = finite(values)
            skipped += bad
            if not kept:
                continue
            # A PTS "system" is a setup (often another kernel on the same box): a label.
            run = ImportedRun("pts", dict(params), started_at=started, label=ident or None,
                              facts={"processor": facts.get("Processor", ""), "release": facts.get("Kernel", ""),
                                     "os": facts.get("OS", ""), "memory": facts.get("Memory", "")})
            run.metrics.append(ImportedMetric("pts.value", scale, Direction.HIGHER if higher else Direction.LOWER,
                                              kept, summary))
            runs.append(run)
    return runs, skipped


IMPORTERS: dict[str, Importer] = {
    "gbench": gbench, "hyperfine": hyperfine, "pytest-benchmark": pytest_benchmark, "bmf": bmf, "otava": otava,
    "lkp": lkp, "criterion": criterion, "asv": asv, "pts": pts,
}


def detect(path: Path) -> str:
    """The format of a file by its shape; ImportFailed when none fits."""
    if path.suffix == ".csv":
        return "otava"
    if path.suffix == ".xml":
        return "pts"
    if path.name == "sample.json" and path.parent.name == "new":
        return "criterion"
    doc = load(path)
    if isinstance(doc, dict):
        if "benchmarks" in doc and isinstance(doc.get("context"), dict):
            return "gbench"
        if "benchmarks" in doc and ("machine_info" in doc or "commit_info" in doc):
            return "pytest-benchmark"
        if isinstance(doc.get("results"), list) and all(isinstance(r, dict) and "command" in r
                                                         for r in doc["results"]):
            return "hyperfine"
        if doc.get("perfline_export"):
            return "perfline"
        if "commit_hash" in doc and isinstance(doc.get("results"), dict):
            return "asv"
        if doc and all(isinstance(v, dict) and v and all(isinstance(m, dict) and "value" in m for m in v.values())
                       for v in doc.values()):
            return "bmf"
        if doc and all(isinstance(v, int | float | list) for v in doc.values()):
            return "lkp"
    raise ImportFailed(path, "not a format perfline imports (gbench, pytest-benchmark, hyperfine, bmf, otava, lkp, "
                             "criterion, asv, pts, perfline); give --format if it is one")
