"""Trackers in the store: what a tracker's first run fixed (its `since` commit), the
head it last saw, and its daily number per tested commit. The runs themselves are
ordinary runs, labelled with the tracker's name."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, select

from perfline.records.errors import UserError
from perfline.store.engine import Sessions, aware
from perfline.store.schema import DailyNumberRow, TrackerRow


class TrackerNotFound(UserError, LookupError):
    pass


@dataclass(frozen=True)
class TrackerRecord:
    name: str
    file: str
    repo: str
    branch: str
    since: str  # full sha
    head: str | None  # the branch head the last `track run` saw


@dataclass(frozen=True)
class DailyNumber:
    commit: str
    position: int  # first-parent index from `since`
    subject: str
    value: float  # 100 = the reference commit; above 100 is better
    low: float
    high: float
    tested_at: datetime


class TrackerQueries:
    """Mixed into Store; uses its session factory."""

    _session: Sessions

    def ensure_tracker(self, name: str, file: str, repo: str, branch: str, since: str) -> TrackerRecord:
        """The stored tracker of this name, created with `since` if new; the file, repo and
        branch follow the file, `since` stays what the first run resolved."""
        now = datetime.now(UTC)
        with self._session.begin() as session:
            row = session.get(TrackerRow, name)
            if row is None:
                row = TrackerRow(name=name, file=file, repo=repo, branch=branch, since=since, head=None,
                                 created_at=now, updated_at=now)
                session.add(row)
            else:
                row.file, row.repo, row.branch, row.updated_at = file, repo, branch, now
            session.flush()
            return _tracker(row)

    def tracker(self, name: str) -> TrackerRecord:
        with self._session() as session:
            row = session.get(TrackerRow, name)
            if row is None:
                raise TrackerNotFound(f"no tracker named {name!r} (see `perfline track list`)")
            return _tracker(row)

    def trackers(self) -> list[TrackerRecord]:
        with self._session() as session:
            return [_tracker(row) for row in session.scalars(select(TrackerRow).order_by(TrackerRow.name))]

    def set_tracker_head(self, name: str, head: str) -> None:
        with self._session.begin() as session:
            row = session.get(TrackerRow, name)
            assert row is not None
            row.head, row.updated_at = head, datetime.now(UTC)

    def set_tracker_since(self, name: str, since: str) -> None:
        """Where tracking starts, moved: only when the branch was rewritten below it."""
        with self._session.begin() as session:
            row = session.get(TrackerRow, name)
            assert row is not None
            row.since, row.updated_at = since, datetime.now(UTC)

    def forget_tracker(self, name: str) -> None:
        """The tracker and its daily numbers; its runs and regressions stay."""
        with self._session.begin() as session:
            if session.get(TrackerRow, name) is None:
                raise TrackerNotFound(f"no tracker named {name!r} (see `perfline track list`)")
            session.execute(delete(DailyNumberRow).where(DailyNumberRow.tracker == name))
            session.execute(delete(TrackerRow).where(TrackerRow.name == name))

    def set_daily_numbers(self, name: str, numbers: list[DailyNumber]) -> None:
        """Replace the tracker's daily numbers (they are all relative to one reference)."""
        with self._session.begin() as session:
            session.execute(delete(DailyNumberRow).where(DailyNumberRow.tracker == name))
            session.add_all(DailyNumberRow(tracker=name, **number.__dict__) for number in numbers)

    def daily_numbers(self, name: str) -> list[DailyNumber]:
        with self._session() as session:
            rows = session.scalars(select(DailyNumberRow).where(DailyNumberRow.tracker == name)
                                   .order_by(DailyNumberRow.position))
            return [DailyNumber(r.commit, r.position, r.subject, r.value, r.low, r.high, aware(r.tested_at))
                    for r in rows]


def _tracker(row: TrackerRow) -> TrackerRecord:
    return TrackerRecord(row.name, row.file, row.repo, row.branch, row.since, row.head)
