"""Storing imported runs: all of one import in one transaction, or nothing."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import insert, select, text

from perfline.records.metric import Direction, Metric
from perfline.store.engine import Sessions, aware
from perfline.store.schema import KernelConfig, MetricRow, RegressionRow, RunRow, SampleRow


@dataclass(frozen=True)
class NewRun:
    """One run as the store takes it: its `runs` columns (without id) and its samples
    as (repetition, metric, source, value, taken_at)."""

    columns: dict[str, Any]
    samples: list[tuple[int, Metric, str, float, datetime]]


# Samples in one import from which PostgreSQL's statistics are brought up to date.
ANALYZE_AFTER = 10_000


class ImportQueries:
    """Mixed into Store; uses its session factory."""

    _session: Sessions

    def imported_from(self, sha256: str) -> list[int]:
        """Runs already imported from a file with this content."""
        query = select(RunRow.id).where(RunRow.settings["imported"]["sha256"].as_string() == sha256)
        with self._session() as session:
            return list(session.scalars(query))

    def add_imported(self, runs: Iterable[NewRun], configs: dict[str, dict[str, str]] | None = None) -> list[int]:
        """Store every run and sample (and the kernel configs they name) in one
        transaction: an import is whole or absent."""
        ids = []
        stored = 0
        with self._session.begin() as session:
            for digest, config in (configs or {}).items():
                if session.get(KernelConfig, digest) is None:
                    session.add(KernelConfig(hash=digest, source=config["source"], content=config["content"]))
            known = set(session.scalars(select(MetricRow.name)))
            for new in runs:
                for _, metric, _, _, _ in new.samples:
                    if metric.name not in known:
                        session.add(MetricRow(name=metric.name, unit=metric.unit, direction=metric.direction.value,
                                              description=metric.description))
                        known.add(metric.name)
                session.flush()
                row = RunRow(**new.columns)
                session.add(row)
                session.flush()
                # Core's executemany, not ORM objects: a million samples in seconds.
                if new.samples:
                    session.execute(insert(SampleRow), [
                        {"run_id": row.id, "repetition": rep, "metric": metric.name, "source": source,
                         "value": value, "taken_at": taken} for rep, metric, source, value, taken in new.samples])
                    stored += len(new.samples)
                ids.append(row.id)
        if stored >= ANALYZE_AFTER and session.get_bind().dialect.name == "postgresql":
            # Right after a bulk load PostgreSQL's planner has no statistics of it (autovacuum
            # comes later) and read one 2,000-point series in 2.2 s instead of 37 ms
            # (bench/store_scale.py at a million samples).
            with self._session.begin() as session:
                session.execute(text("ANALYZE runs, samples"))
        return ids

    def export_runs(self, run_ids: list[int] | None = None, label: str | None = None,
                    since: datetime | None = None) -> tuple[list[dict[str, Any]], list[Metric],
                                                             dict[str, dict[str, str]], list[dict[str, Any]]]:
        """The selected runs (all when nothing is selected) oldest first, each with every
        column but its id and its samples; the metrics and kernel configs they use; the
        regressions between two of them, runs named by position."""
        query = select(RunRow).order_by(RunRow.started_at, RunRow.id)
        if run_ids:
            query = query.where(RunRow.id.in_(run_ids))
        if label is not None:
            query = query.where(RunRow.label == label)
        if since is not None:
            query = query.where(RunRow.started_at >= since)
        with self._session() as session:
            rows = list(session.scalars(query))
            position = {row.id: i for i, row in enumerate(rows)}
            runs, names, hashes = [], set(), set()
            for row in rows:
                columns = {c.name: getattr(row, c.name) for c in RunRow.__table__.columns if c.name != "id"}
                for key in ("started_at", "finished_at"):
                    columns[key] = aware(columns[key]).isoformat() if columns[key] else None
                samples = sorted(row.samples, key=lambda s: s.id)
                columns["samples"] = [[s.repetition, s.metric, s.source, s.value, aware(s.taken_at).isoformat()]
                                      for s in samples]
                names |= {s.metric for s in samples}
                if row.config_hash:
                    hashes.add(row.config_hash)
                runs.append(columns)
            metrics = [Metric(m.name, m.unit, Direction(m.direction), m.description)
                       for m in session.scalars(select(MetricRow).where(MetricRow.name.in_(names))
                                                .order_by(MetricRow.name))]
            configs = {c.hash: {"source": c.source, "content": c.content}
                       for c in session.scalars(select(KernelConfig).where(KernelConfig.hash.in_(hashes)))}
            regressions = []
            for r in session.scalars(select(RegressionRow).order_by(RegressionRow.id)):
                if r.before_run_id in position and r.after_run_id in position:
                    regressions.append({
                        "metric": r.metric, "benchmark": r.benchmark, "case_key": r.case_key,
                        "machine_id": r.machine_id, "before_run": position[r.before_run_id],
                        "after_run": position[r.after_run_id], "kind": r.kind, "change_pct": r.change_pct,
                        "ci_pct": [r.ci_low_pct, r.ci_high_pct], "strength": r.strength, "status": r.status,
                        "note": r.note, "detected_at": aware(r.detected_at).isoformat(),
                        "updated_at": aware(r.updated_at).isoformat(), "good": r.good, "bad": r.bad,
                        "culprit": r.culprit, "culprit_subject": r.culprit_subject, "triage": r.triage,
                        "owner": r.owner, "due": r.due.isoformat() if r.due else None,
                    })
        return runs, metrics, configs, regressions

    def add_exported_regressions(self, run_ids: list[int], regressions: list[dict[str, Any]]) -> None:
        """After add_imported of a perfline export: its regressions, runs by position."""
        with self._session.begin() as session:
            for r in regressions:
                session.add(RegressionRow(
                    metric=r["metric"], benchmark=r["benchmark"], case_key=r["case_key"], machine_id=r["machine_id"],
                    before_run_id=run_ids[r["before_run"]], after_run_id=run_ids[r["after_run"]], kind=r["kind"],
                    change_pct=r["change_pct"], ci_low_pct=r["ci_pct"][0], ci_high_pct=r["ci_pct"][1],
                    strength=r["strength"], status=r["status"], note=r["note"],
                    detected_at=datetime.fromisoformat(r["detected_at"]),
                    updated_at=datetime.fromisoformat(r["updated_at"]), good=r["good"], bad=r["bad"],
                    culprit=r["culprit"], culprit_subject=r["culprit_subject"], triage=r["triage"], owner=r["owner"],
                    due=date.fromisoformat(r["due"]) if r["due"] else None))
