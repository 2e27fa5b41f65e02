"""Boots of a machine into a kernel under test (target kexec), as the store keeps them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from perfline.store.engine import Sessions, aware
from perfline.store.schema import FleetAttemptRow, KexecBootRow, KexecSeriesRow

# A boot in one of these states still has something to do after the next boot.
OPEN_STATES = ("pending", "booted", "measured")
STATES = (*OPEN_STATES, "returned", "boot-failed", "abandoned")
SERIES_STATES = ("open", "done", "failed", "abandoned")


@dataclass(frozen=True)
class PlannedBoot:
    """What is written before the machine goes down."""

    machine_id: str
    hostname: str
    kernel: str
    release: str
    banner: str
    sha256: str
    cmdline: str
    token: str
    default_release: str
    cases: list[dict[str, Any]]
    label: str | None
    kernel_commit: str | None
    boot_id_before: str
    # The fleet job attempt the boot is for (a worker's kernel job); None for `run`.
    fleet_attempt: int | None
    # `kexec`, or `reboot`: through the boot loader's one-shot entry (targets.boot_entry).
    how: str
    # The series (an ab over boots) this boot is a block of, and which one; None for `run`.
    series_id: int | None
    series_step: int | None
    # Which watchdog guards the boot (targets.watchdog), as said before it went down.
    watchdog: str | None


@dataclass(frozen=True)
class KexecBoot(PlannedBoot):
    """A planned boot as stored, and how far it got."""

    id: int
    state: str
    boot_id_after: str | None
    run_ids: list[int]
    console: str | None
    error: str | None
    updated_at: datetime


@dataclass(frozen=True)
class KexecSeries:
    """Boots of one machine that make one answer (an ab over kernels), as stored."""

    id: int
    machine_id: str
    kind: str
    # Each block: {"side": "A" or "B", "case": case_to_json(...)}, in the order booted.
    steps: list[dict[str, Any]]
    settings: dict[str, Any]
    label: str | None
    kernel_commit: str | None
    state: str
    error: str | None


class KexecBootQueries:
    """Mixed into Store; uses its session factory."""

    _session: Sessions

    def plan_kexec_boot(self, plan: PlannedBoot) -> KexecBoot:
        """A new `pending` boot. A machine has one open boot at a time: planning another
        while one is open is refused by the caller, who says which."""
        now = _now()
        with self._session.begin() as session:
            row = KexecBootRow(**vars(plan), state="pending", boot_id_after=None, run_ids=[], console=None,
                               error=None, created_at=now, updated_at=now)
            session.add(row)
            session.flush()
            return _boot(row)

    def open_kexec_boot(self, machine_id: str) -> KexecBoot | None:
        """The machine's boot that has something left to do, if any (the newest)."""
        with self._session() as session:
            row = session.scalars(
                select(KexecBootRow)
                .where(KexecBootRow.machine_id == machine_id, KexecBootRow.state.in_(OPEN_STATES))
                .order_by(KexecBootRow.id.desc())
                .limit(1)
            ).first()
            return None if row is None else _boot(row)

    def kexec_boot(self, boot_id: int) -> KexecBoot:
        with self._session() as session:
            row = session.get(KexecBootRow, boot_id)
            if row is None:
                raise LookupError(f"no kexec boot {boot_id}")
            return _boot(row)

    def kexec_boots(self, machine_id: str | None = None, limit: int = 20) -> list[KexecBoot]:
        with self._session() as session:
            query = select(KexecBootRow).order_by(KexecBootRow.id.desc()).limit(limit)
            if machine_id is not None:
                query = query.where(KexecBootRow.machine_id == machine_id)
            return [_boot(row) for row in session.scalars(query)]

    def booting_attempt(self, job_id: int) -> KexecBoot | None:
        """The latest boot of a running attempt at this fleet job, if any: its machine is
        silent because it is booting the job's kernel (an open boot), or it is between
        the boots of a job that boots it many times (a closed one: its worker takes the
        job up again once back on its default kernel), not because it died."""
        with self._session() as session:
            row = session.scalars(
                select(KexecBootRow)
                .join(FleetAttemptRow, FleetAttemptRow.id == KexecBootRow.fleet_attempt)
                .where(FleetAttemptRow.job_id == job_id, FleetAttemptRow.state == "running")
                .order_by(KexecBootRow.id.desc())
                .limit(1)
            ).first()
            return None if row is None else _boot(row)

    def attempts_between_boots(self, machine: str) -> list[int]:
        """This machine's running attempts whose boots are all closed: jobs it carries
        over its boots (a kernel tracker's confirmation or bisection), to take up again."""
        with self._session() as session:
            booted = select(KexecBootRow.id).where(KexecBootRow.fleet_attempt == FleetAttemptRow.id)
            return list(session.scalars(
                select(FleetAttemptRow.id)
                .where(FleetAttemptRow.machine == machine, FleetAttemptRow.state == "running",
                       booted.exists(), ~booted.where(KexecBootRow.state.in_(OPEN_STATES)).exists())
                .order_by(FleetAttemptRow.id)))

    def booting_machines(self) -> set[str]:
        """The machine ids in an open boot for a fleet job (`fleet status`: booting)."""
        with self._session() as session:
            return set(session.scalars(
                select(KexecBootRow.machine_id)
                .where(KexecBootRow.state.in_(OPEN_STATES), KexecBootRow.fleet_attempt.is_not(None))))

    def boot_failed_commits(self, label: str) -> dict[str, str]:
        """Per kernel commit: why a boot under this label into its kernel failed (a
        tracker's commits whose kernel did not boot: untestable, never retried)."""
        with self._session() as session:
            rows = session.execute(
                select(KexecBootRow.kernel_commit, KexecBootRow.error)
                .where(KexecBootRow.label == label, KexecBootRow.state == "boot-failed",
                       KexecBootRow.kernel_commit.is_not(None))
                .order_by(KexecBootRow.id))
            return {str(commit): str(error or "boot-failed") for commit, error in rows}

    def kexec_boots_for(self, label: str, kernel_commit: str) -> list[KexecBoot]:
        """The boots under a label into one commit's kernel, oldest first (a bisection's probes)."""
        with self._session() as session:
            rows = session.scalars(select(KexecBootRow).where(KexecBootRow.label == label,
                                                              KexecBootRow.kernel_commit == kernel_commit)
                                   .order_by(KexecBootRow.id))
            return [_boot(row) for row in rows]

    def open_kexec_series(self, kind: str) -> list[KexecSeries]:
        with self._session() as session:
            rows = session.scalars(select(KexecSeriesRow).where(KexecSeriesRow.kind == kind,
                                                                KexecSeriesRow.state == "open")
                                   .order_by(KexecSeriesRow.id))
            return [_series(row) for row in rows]

    def series_boots(self, series_id: int) -> list[KexecBoot]:
        """A series' boots, oldest first (a block booted again after an abandoned start is there twice)."""
        with self._session() as session:
            rows = session.scalars(select(KexecBootRow).where(KexecBootRow.series_id == series_id)
                                   .order_by(KexecBootRow.id))
            return [_boot(row) for row in rows]

    def plan_kexec_series(self, machine_id: str, kind: str, steps: list[dict[str, Any]], settings: dict[str, Any],
                          label: str | None, kernel_commit: str | None) -> KexecSeries:
        now = _now()
        with self._session.begin() as session:
            row = KexecSeriesRow(machine_id=machine_id, kind=kind, steps=steps, settings=settings, label=label,
                                 kernel_commit=kernel_commit, state="open", error=None, created_at=now,
                                 updated_at=now)
            session.add(row)
            session.flush()
            return _series(row)

    def kexec_series(self, series_id: int) -> KexecSeries:
        with self._session() as session:
            row = session.get(KexecSeriesRow, series_id)
            if row is None:
                raise LookupError(f"no kexec series {series_id}")
            return _series(row)

    def kexec_series_for(self, kind: str, key: str, value: object) -> KexecSeries | None:
        """The newest series of a kind whose settings give `key` this value (a tracker
        regression's confirmation over boots), in any state."""
        return next(iter(self.kexec_series_all_for(kind, key, value)), None)

    def kexec_series_all_for(self, kind: str, key: str, value: object) -> list[KexecSeries]:
        """Every series of a kind whose settings give `key` this value, newest first."""
        with self._session() as session:
            return [_series(row) for row in _series_rows(session, kind, key, value)]

    def set_aside_kexec_series(self, kind: str, key: str, value: object) -> int:
        """The series `kexec_series_for` would find for this key no longer answer it: their
        `key` setting becomes `KEY_set_aside` (a record reopened by hand is confirmed
        afresh; the old series and their runs stay in the store). How many were set aside."""
        def write(session: Session, _retried: bool) -> int:
            rows = _series_rows(session, kind, key, value)
            for row in rows:
                settings = dict(row.settings)
                settings[f"{key}_set_aside"] = settings.pop(key)
                row.settings, row.updated_at = settings, _now()
            session.flush()
            return len(rows)

        return self._session.write(write)

    def kexec_series_list(self, limit: int = 20) -> list[KexecSeries]:
        with self._session() as session:
            rows = session.scalars(select(KexecSeriesRow).order_by(KexecSeriesRow.id.desc()).limit(limit))
            return [_series(row) for row in rows]

    def end_kexec_series(self, series_id: int, state: str, error: str | None = None) -> KexecSeries:
        assert state in SERIES_STATES

        def write(session: Session, _retried: bool) -> KexecSeries:
            row = session.get(KexecSeriesRow, series_id)
            if row is None:
                raise LookupError(f"no kexec series {series_id}")
            row.state, row.error, row.updated_at = state, error, _now()
            session.flush()
            return _series(row)

        return self._session.write(write)

    def update_kexec_boot(self, boot_id: int, state: str, **fields: Any) -> KexecBoot:
        """Move a boot on: its state, and any of boot_id_after, run_ids, console, error."""
        assert state in STATES
        assert set(fields) <= {"boot_id_after", "run_ids", "console", "error"}

        def write(session: Session, _retried: bool) -> KexecBoot:
            row = session.get(KexecBootRow, boot_id)
            if row is None:
                raise LookupError(f"no kexec boot {boot_id}")
            row.state, row.updated_at = state, _now()
            for name, value in fields.items():
                setattr(row, name, value)
            session.flush()
            return _boot(row)

        return self._session.write(write)


def _boot(row: KexecBootRow) -> KexecBoot:
    return KexecBoot(
        id=row.id, machine_id=row.machine_id, hostname=row.hostname, kernel=row.kernel, release=row.release,
        banner=row.banner, sha256=row.sha256, cmdline=row.cmdline, token=row.token,
        default_release=row.default_release, cases=list(row.cases), label=row.label,
        kernel_commit=row.kernel_commit, fleet_attempt=row.fleet_attempt, how=row.how, series_id=row.series_id,
        series_step=row.series_step, watchdog=row.watchdog, state=row.state, boot_id_before=row.boot_id_before,
        boot_id_after=row.boot_id_after, run_ids=[int(i) for i in row.run_ids], console=row.console,
        error=row.error, updated_at=aware(row.updated_at),
    )


def _series(row: KexecSeriesRow) -> KexecSeries:
    return KexecSeries(id=row.id, machine_id=row.machine_id, kind=row.kind, steps=list(row.steps),
                       settings=dict(row.settings), label=row.label, kernel_commit=row.kernel_commit,
                       state=row.state, error=row.error)


def _now() -> datetime:
    return datetime.now(UTC)


def _series_rows(session: Session, kind: str, key: str, value: object) -> list[KexecSeriesRow]:
    """The series rows of a kind whose settings give `key` this value, newest first."""
    rows = session.scalars(select(KexecSeriesRow).where(KexecSeriesRow.kind == kind)
                           .order_by(KexecSeriesRow.id.desc()))
    return [row for row in rows if (row.settings or {}).get(key) == value]
