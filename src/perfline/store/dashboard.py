"""What the dashboard reads beyond the CLI's queries: lean series rows, machines, and
the one thing it writes, a regression's triage with its history."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import cast

from sqlalchemy import func, select

from perfline.records.status import RunStatus
from perfline.store.engine import Sessions, aware, by_id
from perfline.store.schema import RegressionEventRow, RegressionRow, RunRow, SampleRow

# Perfherder's alert states: what a person decided about a regression.
TRIAGE = ("untriaged", "acknowledged", "investigating", "fixed", "invalid", "wontfix", "backed-out", "infra")
TRIAGE_FIELDS = ("triage", "owner", "note", "due")


# (run id, case key, machine id, hostname, kernel commit, label, started at, value)
SeriesRow = tuple[int, str, str, str, str | None, str | None, datetime, float]


@dataclass(frozen=True)
class Machine:
    machine_id: str
    hostname: str
    runs: int
    last_run: datetime


@dataclass(frozen=True)
class Event:
    at: datetime
    who: str
    field: str
    old: str | None
    new: str | None


class TriageError(ValueError):
    pass


class DashboardQueries:
    """Mixed into Store; uses its session factory."""

    _session: Sessions

    def series_rows(self, metric: str, case_key: str | None = None, machine_id: str | None = None,
                    since: datetime | None = None) -> list[SeriesRow]:
        """Every benchmark sample of `metric` from completed runs that are not a side of
        an interleaved A/B, oldest run first: only the columns a graph needs."""
        query = (select(RunRow.id, RunRow.case_key, RunRow.machine_id, RunRow.hostname, RunRow.kernel_commit,
                        RunRow.label, RunRow.started_at, SampleRow.value)
                 .join(SampleRow, SampleRow.run_id == RunRow.id)
                 .where(SampleRow.metric == metric, SampleRow.source == "benchmark",
                        RunRow.status == RunStatus.COMPLETED, RunRow.settings["interleaved"].as_string().is_(None))
                 .order_by(RunRow.started_at, RunRow.id, SampleRow.id))
        if case_key is not None:
            query = query.where(RunRow.case_key == case_key)
        if machine_id is not None:
            query = query.where(RunRow.machine_id == machine_id)
        if since is not None:
            query = query.where(RunRow.started_at >= since)
        # Core rows as plain tuples, not ORM entities: a 10,000-point series is read in
        # tens of milliseconds. Times stay as stored (naive UTC on SQLite).
        with self._session() as session:
            return cast(list[SeriesRow], session.connection().execute(query).all())

    def metric_cases(self, metric: str) -> list[tuple[str, str, str]]:
        """(case key, machine id, hostname) of every series of the metric."""
        query = (select(RunRow.case_key, RunRow.machine_id, RunRow.hostname).distinct()
                 .join(SampleRow, SampleRow.run_id == RunRow.id).where(SampleRow.metric == metric))
        with self._session() as session:
            return sorted({(r[0], r[1], r[2]) for r in session.execute(query)})

    def machines(self) -> list[Machine]:
        query = (select(RunRow.machine_id, func.max(RunRow.hostname), func.count(RunRow.id),
                        func.max(RunRow.started_at)).group_by(RunRow.machine_id))
        with self._session() as session:
            return sorted((Machine(m, h, n, aware(last)) for m, h, n, last in session.execute(query)),
                          key=lambda m: m.last_run, reverse=True)

    def set_triage(self, regression_id: int, who: str, changes: dict[str, str | None]) -> list[Event]:
        """Change the triage fields given (state, owner, note, due date as YYYY-MM-DD);
        each change is stored with who and when. Raises TriageError on a bad value."""
        unknown = set(changes) - set(TRIAGE_FIELDS)
        if unknown:
            raise TriageError(f"unknown field(s): {', '.join(sorted(unknown))}; known: {', '.join(TRIAGE_FIELDS)}")
        if "triage" in changes and changes["triage"] not in TRIAGE:
            raise TriageError(f"triage {changes['triage']!r}: one of {', '.join(TRIAGE)}")
        due: date | None = None
        if changes.get("due"):
            try:
                due = date.fromisoformat(str(changes["due"]))
            except ValueError:
                raise TriageError(f"due {changes['due']!r}: a date, YYYY-MM-DD") from None
        now = datetime.now(UTC)
        events = []
        with self._session.begin() as session:
            row = by_id(session, RegressionRow, regression_id)
            if row is None:
                raise LookupError(f"no regression with id {regression_id}")
            for field, value in changes.items():
                old = getattr(row, field)
                new: object = due if field == "due" else (value or None)
                if old == new:
                    continue
                setattr(row, field, new)
                events.append(RegressionEventRow(regression_id=regression_id, at=now, who=who, field=field,
                                                 old=None if old is None else str(old),
                                                 new=None if new is None else str(new)))
            if events:
                row.updated_at = now
                session.add_all(events)
        return [Event(e.at, e.who, e.field, e.old, e.new) for e in events]

    def regression_events(self, regression_id: int) -> list[Event]:
        with self._session() as session:
            rows = session.scalars(select(RegressionEventRow).where(RegressionEventRow.regression_id == regression_id)
                                   .order_by(RegressionEventRow.id))
            return [Event(aware(r.at), r.who, r.field, r.old, r.new) for r in rows]
