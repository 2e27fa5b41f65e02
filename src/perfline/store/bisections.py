"""Bisection state in the store: definitions, every sample, every build.

Everything a bisection decides is derived from these rows, so `bisect resume` after a
crash replays them and repeats no finished measurement or build.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from perfline.records.errors import UserError
from perfline.records.status import BisectionStatus
from perfline.store.engine import Sessions, by_id, storable_ids
from perfline.store.schema import BisectBuildRow, BisectionRow, BisectSampleRow


class BisectionNotFound(UserError, LookupError):
    pass


@dataclass(frozen=True)
class BisectionSpec:
    repo: str
    good: str
    bad: str
    commits: list[str]
    build: str
    command: str | None
    job: str | None
    metric: str
    direction: str
    max_runs: int
    # A kernel bisection's config copy and the file it was copied from; None otherwise.
    kernel_config: str | None = None
    kernel_config_source: str | None = None


@dataclass(frozen=True)
class BisectionRecord:
    id: int
    spec: BisectionSpec
    status: str
    result: dict[str, Any] | None
    created_at: datetime


@dataclass(frozen=True)
class BisectSample:
    commit_index: int
    phase: str
    value: float
    run_id: int | None


@dataclass(frozen=True)
class BisectBuild:
    commit_index: int
    ok: bool
    seconds: float
    log_tail: str


class BisectionQueries:
    """Mixed into Store; uses its session factory."""

    _session: Sessions

    def create_bisection(self, spec: BisectionSpec) -> int:
        now = datetime.now(UTC)
        with self._session.begin() as session:
            row = BisectionRow(**spec.__dict__, status=BisectionStatus.RUNNING, result=None,
                               created_at=now, updated_at=now)
            session.add(row)
            session.flush()
            return row.id

    def bisection(self, bisection_id: int | None = None, *, unfinished: bool = False) -> BisectionRecord:
        """The bisection with this id, or the newest one (the newest still running with
        `unfinished`)."""
        with self._session() as session:
            query = select(BisectionRow).order_by(BisectionRow.id.desc())
            if bisection_id is not None:
                query = query.where(BisectionRow.id.in_(storable_ids([bisection_id])))
            elif unfinished:
                query = query.where(BisectionRow.status == BisectionStatus.RUNNING)
            row = session.scalars(query).first()
            if row is None:
                which = (f"with id {bisection_id}" if bisection_id is not None
                         else "unfinished" if unfinished else "yet")
                raise BisectionNotFound(f"no bisection {which} (start one with `perfline bisect start`)")
            return _bisection(row)

    def bisection_of_range(self, repo: str, good: str, bad: str, job: str, metric: str,
                           after: int) -> BisectionRecord | None:
        """The newest bisection of this range (as started: full shas), job and metric
        started after bisection `after`: a tracker's bisection into the branch a merge
        brought in, found again by the passes after the one that started it."""
        with self._session() as session:
            row = session.scalars(
                select(BisectionRow).where(
                    BisectionRow.id > after, BisectionRow.repo == repo, BisectionRow.good == good,
                    BisectionRow.bad == bad, BisectionRow.job == job, BisectionRow.metric == metric,
                ).order_by(BisectionRow.id.desc())
            ).first()
            return None if row is None else _bisection(row)

    def add_bisect_sample(self, bisection_id: int, sample: BisectSample) -> None:
        with self._session.begin() as session:
            session.add(BisectSampleRow(bisection_id=bisection_id, taken_at=datetime.now(UTC),
                                        **sample.__dict__))

    def bisect_samples(self, bisection_id: int) -> list[BisectSample]:
        with self._session() as session:
            rows = session.scalars(
                select(BisectSampleRow).where(BisectSampleRow.bisection_id == bisection_id)
                .order_by(BisectSampleRow.id)
            )
            return [BisectSample(r.commit_index, r.phase, r.value, r.run_id) for r in rows]

    def add_bisect_build(self, bisection_id: int, build: BisectBuild) -> None:
        with self._session.begin() as session:
            session.add(BisectBuildRow(bisection_id=bisection_id, **build.__dict__))

    def bisect_builds(self, bisection_id: int) -> list[BisectBuild]:
        with self._session() as session:
            rows = session.scalars(
                select(BisectBuildRow).where(BisectBuildRow.bisection_id == bisection_id)
                .order_by(BisectBuildRow.id)
            )
            return [BisectBuild(r.commit_index, r.ok, r.seconds, r.log_tail) for r in rows]

    def finish_bisection(self, bisection_id: int, status: str, result: dict[str, Any]) -> None:
        with self._session.begin() as session:
            row = by_id(session, BisectionRow, bisection_id)
            assert row is not None
            row.status, row.result, row.updated_at = status, result, datetime.now(UTC)


def _bisection(row: BisectionRow) -> BisectionRecord:
    spec = BisectionSpec(
        repo=row.repo, good=row.good, bad=row.bad, commits=list(row.commits),
        build=row.build, command=row.command, job=row.job, metric=row.metric,
        direction=row.direction, max_runs=row.max_runs, kernel_config=row.kernel_config,
        kernel_config_source=row.kernel_config_source,
    )
    return BisectionRecord(row.id, spec, row.status, row.result, row.created_at)
