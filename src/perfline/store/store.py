"""The result store: the only code that speaks SQL."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from sqlalchemy import ColumnElement, CursorResult, Engine, delete, func, select, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from perfline import __version__
from perfline.records.errors import UserError
from perfline.records.fingerprint import Fingerprint
from perfline.records.job import Case
from perfline.records.metric import Direction, Measurement, Metric
from perfline.records.profile import Chain, ChainEntry, Profile, ProfileEntry, Symbol
from perfline.records.status import RunStatus
from perfline.stats.profile_diff import mean_shares
from perfline.store import migrate
from perfline.store.bisections import BisectionQueries
from perfline.store.commits import CommitQueries
from perfline.store.dashboard import DashboardQueries
from perfline.store.engine import (
    Sessions,
    StoreUnavailable,
    aware,
    by_id,
    connect,
    insert_ignoring_conflicts,
    resolve_url,
    storable_ids,
    updated,
)
from perfline.store.fleet import TAKEN_BACK, FleetQueries
from perfline.store.imports import ImportQueries
from perfline.store.kexec_boots import KexecBootQueries
from perfline.store.outbox import OutboxQueries
from perfline.store.schema import (
    KernelConfig,
    MetricRow,
    ProfileChainRow,
    ProfileEntryRow,
    RegressionRow,
    RunRow,
    SampleRow,
)
from perfline.store.trackers import TrackerQueries

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

K = TypeVar("K")

# PostgreSQL advisory lock held while the schema is brought up to date.
MIGRATION_LOCK = 0x7065726D


class RunNotFound(UserError, LookupError):
    """A run or regression id the store does not have: the user's mistake, so every
    command that meets one prints one `error:` line and exits 2."""


# The kernel a qemu run booted is in its settings (targets.guest), not a column of its own.
_VM_KERNEL = RunRow.settings["vm_kernel"].as_string()
# A LIMIT the drivers bind (64-bit): "all of them" for any store.
_MAX_LIMIT = 2**62
_HAS_SAMPLES = select(SampleRow.id).where(SampleRow.run_id == RunRow.id).exists()


@dataclass(frozen=True)
class RunInfo:
    id: int
    job: str
    benchmark: str
    case_key: str
    target: str
    kernel_release: str
    hostname: str
    label: str | None
    kernel_commit: str | None
    status: str
    samples: int
    repeat: int
    started_at: datetime
    finished_at: datetime | None


class Sample(NamedTuple):
    """One stored value. A tuple, not a frozen dataclass: a comparison by label loads
    hundreds of thousands, and a frozen dataclass costs three times as much to make."""

    repetition: int
    metric: Metric
    source: str
    value: float


@dataclass(frozen=True)
class RunDetail:
    info: RunInfo
    params: dict[str, Any]
    tunables: dict[str, Any]
    monitors: list[str]
    settings: dict[str, Any]
    fingerprint: dict[str, Any]
    error: str | None
    output_tail: str | None
    # Empty from Store.get_runs, which gives the samples of many runs as columns instead.
    samples: list[Sample] = field(default_factory=list)


class SampleColumns(NamedTuple):
    """One metric's samples over several runs, as arrays: a comparison by label reads
    hundreds of thousands, and it works on arrays (stats.two_sample)."""

    metric: Metric
    source: str  # of the metric's first sample
    values: NDArray[np.float64]  # run by run in the runs' order, each run's in the order taken
    runs: NDArray[np.int64]  # the run id of each value


class RunsWithSamples(NamedTuple):
    runs: list[RunDetail]  # their `samples` empty: they are in `columns`
    columns: dict[str, SampleColumns]  # by metric name, in the order the metrics first appear


@dataclass(frozen=True)
class RunValues:
    """One run's values of one metric, with what a series needs to place them."""

    run: RunInfo
    machine_id: str
    metric: Metric
    values: list[float]
    # A side of an interleaved A/B (`ab`, `regressions confirm`): settings `interleaved`.
    interleaved: bool = False


@dataclass(frozen=True)
class Suspect:
    """A commit a regression may be in, when its bisection ended on a range."""

    sha: str
    subject: str
    why: str  # "measured bad", "did not build", "the benchmark failed on two builds"


@dataclass(frozen=True)
class Regression:
    id: int
    metric: str
    benchmark: str
    case_key: str
    machine_id: str
    before_run_id: int
    after_run_id: int
    kind: str
    change_pct: float
    ci_pct: tuple[float, float]
    strength: float
    status: str
    note: str | None
    detected_at: datetime
    updated_at: datetime
    # What a tracker adds: its name, the tested commits around the change (good: last
    # before, bad: first after), the bisection that narrowed it and the culprit it found.
    tracker: str | None = None
    good: str | None = None
    bad: str | None = None
    bisection_id: int | None = None
    culprit: str | None = None
    culprit_subject: str | None = None
    # A range instead of one culprit (a commit next to the change could not be tested).
    culprits: tuple[Suspect, ...] = ()
    # Triage by people (the dashboard): Perfherder's states, an owner, a due date.
    triage: str = "untriaged"
    owner: str | None = None
    due: date | None = None


class Store(BisectionQueries, TrackerQueries, OutboxQueries, DashboardQueries, ImportQueries, FleetQueries,
            CommitQueries, KexecBootQueries):
    def __init__(self, engine: Engine, outage_wait_s: float = 0.0) -> None:
        self.engine = engine
        self._session = Sessions(sessionmaker(engine, expire_on_commit=False), outage_wait_s)
        self._known_metrics: set[str] = set()

    @classmethod
    def open(cls, url: str | None = None, outage_wait_s: float = 0.0) -> Store:
        """Connect and bring the schema up to date. A store that cannot be opened (no
        server, not a database, no permission) is a StoreUnavailable naming it.

        `outage_wait_s`: how long a server that stops answering is waited for before a
        write fails (0: not at all); the run loop's writes are retried across it."""
        resolved = resolve_url(url)
        try:
            engine = connect(resolved, outage_wait_s)
            with engine.begin() as connection:
                if connection.dialect.name == "postgresql":
                    # Machines of a fleet open a new store together: one migrates it.
                    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
                migrate.upgrade(connection)
        except (DBAPIError, OSError, migrate.UnknownRevision) as exc:
            raise StoreUnavailable(resolved, exc) from None
        return cls(engine, outage_wait_s)

    def close(self) -> None:
        self.engine.dispose()

    def start_run(
        self,
        case: Case,
        fingerprint: Fingerprint,
        *,
        label: str | None = None,
        kernel_commit: str | None = None,
        pid: int,
        fleet_attempt: int | None = None,
    ) -> int:
        """A new run, `running`. With `fleet_attempt`, the run becomes the attempt's in the
        same transaction; if the attempt was taken back already (its machine was thought
        dead), the run starts `interrupted`, so that it can never complete."""
        def write(session: Session, _retried: bool) -> int:
            config_hash = self._ensure_config(session, fingerprint)
            run = RunRow(
                job=case.job,
                benchmark=case.benchmark,
                case_key=case.key,
                params=dict(case.params),
                tunables={kind: dict(values) for kind, values in case.tunables.items()},
                monitors=list(case.monitors),
                target=case.target,
                label=label,
                kernel_commit=kernel_commit,
                hostname=fingerprint.hostname,
                machine_id=fingerprint.machine_id,
                kernel_release=fingerprint.kernel_release,
                fingerprint=fingerprint.to_json(),
                config_hash=config_hash,
                settings={},
                status=RunStatus.RUNNING,
                repeat=case.repeat,
                warmup=case.warmup,
                started_at=_now(),
                pid=pid,
                boot_id=fingerprint.boot_id,
                perfline_version=__version__,
            )
            session.add(run)
            session.flush()
            if fleet_attempt is not None and not self.attach_run(session, fleet_attempt, run.id):
                run.status, run.error = RunStatus.INTERRUPTED, TAKEN_BACK
            return run.id

        return self._session.write(write)

    def set_fingerprint(self, run_id: int, fingerprint: Fingerprint) -> None:
        """Replace the run's description of the system under test, known only after
        set-up for a VM guest. The row's host, pid and boot id stay: they are about the
        perfline process, for telling a dead run from a live one."""
        def write(session: Session, _retried: bool) -> None:
            run = self._run(session, run_id)
            run.config_hash = self._ensure_config(session, fingerprint)
            run.kernel_release = fingerprint.kernel_release
            run.fingerprint = fingerprint.to_json()

        self._session.write(write)

    def set_aside_runs(self, key: str, value: int) -> int:
        """The runs whose settings hold `key`: `value` no longer do: it becomes
        `KEY_set_aside` (a record reopened by hand is confirmed afresh; the earlier
        attempts' runs stay in the store). How many were set aside."""
        def write(session: Session, _retried: bool) -> int:
            rows = list(session.scalars(select(RunRow).where(RunRow.settings[key].as_integer() == value)))
            for row in rows:
                settings = dict(row.settings)
                settings[f"{key}_set_aside"] = settings.pop(key)
                row.settings = settings
            session.flush()
            return len(rows)

        return self._session.write(write)

    def set_settings(self, run_id: int, settings: dict[str, Any]) -> None:
        def write(session: Session, _retried: bool) -> None:
            self._run(session, run_id).settings = settings

        self._session.write(write)

    def add_samples(
        self, run_id: int, repetition: int, measurements: Iterable[Measurement], source: str
    ) -> None:
        """Commit one repetition's values at once, so a crash loses at most this one."""
        measurements = list(measurements)

        def write(session: Session, retried: bool) -> None:
            if retried:  # the lost commit may have landed: never store a repetition twice
                session.execute(delete(SampleRow).where(
                    SampleRow.run_id == run_id, SampleRow.repetition == repetition, SampleRow.source == source))
            self._ensure_metrics(session, (m.metric for m in measurements))
            taken = _now()
            session.add_all(
                SampleRow(
                    run_id=run_id,
                    repetition=repetition,
                    metric=m.metric.name,
                    source=source,
                    value=m.value,
                    taken_at=taken,
                )
                for m in measurements
            )

        self._session.write(write)

    def add_profile(self, run_id: int, repetition: int, profile: Profile) -> None:
        """One repetition's profile, symbols and chains, committed at once like its samples."""

        def write(session: Session, retried: bool) -> None:
            if retried:
                for table in (ProfileEntryRow, ProfileChainRow):
                    session.execute(delete(table).where(table.run_id == run_id, table.repetition == repetition))
            session.add_all(
                ProfileEntryRow(
                    run_id=run_id,
                    repetition=repetition,
                    symbol=e.symbol,
                    dso=e.dso,
                    kernel=e.kernel,
                    share_pct=e.share_pct,
                )
                for e in profile.symbols
            )
            session.add_all(
                ProfileChainRow(run_id=run_id, repetition=repetition, stack=c.key.folded, dso=c.dso,
                                share_pct=c.share_pct)
                for c in profile.chains
            )

        self._session.write(write)

    def profile(self, run_id: int) -> list[ProfileEntry]:
        """The run's profile, largest share first: each symbol's mean share over the
        profiled repetitions, counting 0 where it was not among a repetition's top."""
        mean = mean_shares(self.profile_repetitions(run_id))
        return sorted((ProfileEntry(*key, share) for key, share in mean.items()),
                      key=lambda e: (-e.share_pct, e.key))

    def profile_repetitions(self, run_id: int) -> list[dict[Symbol, float]]:
        """Each profiled repetition's shares by symbol: for intervals."""
        t = ProfileEntryRow
        with self._session() as session:
            rows = session.execute(select(t.repetition, t.symbol, t.dso, t.kernel, t.share_pct)
                                   .where(t.run_id == run_id))
            return _by_repetition((r, Symbol(symbol, dso, kernel), share) for r, symbol, dso, kernel, share in rows)

    def chains(self, run_id: int) -> list[ChainEntry]:
        """The run's call chains, largest share first, as `profile` has its symbols."""
        mean = mean_shares(self.chain_repetitions(run_id))
        return sorted((ChainEntry(*key, share) for key, share in mean.items()),
                      key=lambda e: (-e.share_pct, e.key))

    def chain_repetitions(self, run_id: int) -> list[dict[Chain, float]]:
        """Each profiled repetition's shares by call chain: for intervals. Runs profiled
        before chains were kept have none."""
        t = ProfileChainRow
        with self._session() as session:
            rows = session.execute(select(t.repetition, t.stack, t.dso, t.share_pct)
                                   .where(t.run_id == run_id))
            return _by_repetition((r, Chain.unfolded(stack, dso), share) for r, stack, dso, share in rows)

    def finish_run(
        self, run_id: int, status: str, *, error: str | None = None, output_tail: str | None = None
    ) -> str:
        """Finish a running run; returns the status it has now. A run that is no longer
        running keeps its status: the fleet marks a dead machine's run interrupted, and
        that machine finishing late must not make it complete (store.fleet.take_back)."""
        def write(session: Session, _retried: bool) -> str:
            changed = updated(
                session,
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.status == RunStatus.RUNNING)
                .values(status=status, error=error, output_tail=output_tail, finished_at=_now())
            )
            return status if changed else self._run(session, run_id).status

        return self._session.write(write)

    def reap_dead_runs(self, boot_id: str, hostname: str, alive: Callable[[int], bool]) -> int:
        """Mark runs of this host whose process is gone (SIGKILL, crash, reboot) interrupted.

        Their samples stay: each was committed when it was taken.
        """
        with self._session.begin() as session:
            stale = session.scalars(
                select(RunRow).where(RunRow.status == RunStatus.RUNNING, RunRow.hostname == hostname)
            ).all()
            reaped = [r for r in stale if r.boot_id != boot_id or not alive(r.pid)]
            for run in reaped:
                run.status = RunStatus.INTERRUPTED
                run.error = f"perfline process {run.pid} died before finishing the run"
            return len(reaped)

    def list_runs(self, limit: int = 20) -> list[RunInfo]:
        with self._session() as session:
            counts = (
                select(SampleRow.run_id, func.count(func.distinct(SampleRow.repetition)).label("n"))
                .where(SampleRow.source == "benchmark")
                .group_by(SampleRow.run_id)
                .subquery()
            )
            rows = session.execute(
                select(RunRow, func.coalesce(counts.c.n, 0))
                .outerjoin(counts, counts.c.run_id == RunRow.id)
                .order_by(RunRow.started_at.desc(), RunRow.id.desc())
                .limit(min(limit, _MAX_LIMIT))
            ).all()
            return [_info(run, n) for run, n in rows]

    def find_runs(
        self,
        *,
        label: str | None = None,
        kernel_release: str | None = None,
        vm_kernel: str | None = None,
        benchmark: str | None = None,
        with_samples: bool = True,
        status: RunStatus | None = None,
        setting: tuple[str, int] | None = None,
    ) -> list[int]:
        """Ids of runs matching every given filter, oldest first. `vm_kernel`: the
        registered kernel the run's VM booted (target qemu); `setting`: a (key, integer)
        the run's settings hold (the record a confirmation's runs are of)."""
        query = select(RunRow.id).order_by(RunRow.started_at, RunRow.id)
        if setting is not None:
            query = query.where(RunRow.settings[setting[0]].as_integer() == setting[1])
        if label is not None:
            query = query.where(RunRow.label == label)
        if kernel_release is not None:
            query = query.where(RunRow.kernel_release == kernel_release)
        if vm_kernel is not None:
            query = query.where(vm_kernel == _VM_KERNEL)
        if benchmark is not None:
            query = query.where(RunRow.benchmark == benchmark)
        if with_samples:
            query = query.where(_HAS_SAMPLES)
        if status is not None:
            query = query.where(RunRow.status == status)
        with self._session() as session:
            return list(session.scalars(query))

    def completed_cases(self, label: str, machine_ids: Collection[str]) -> dict[str, set[tuple[str, str]]]:
        """Per kernel commit: the (benchmark, case key) of every completed run with this
        label on these machines, interleaved re-runs left out (a tracker's tested commits)."""
        done = self._cases_by_commit(label, machine_ids, RunStatus.COMPLETED, _HAS_SAMPLES)
        return {commit: set(found) for commit, found in done.items()}

    def failed_cases(self, label: str, machine_ids: Collection[str]) -> dict[str, Counter[tuple[str, str]]]:
        """Per kernel commit: how many runs of each (benchmark, case key) with this label
        on these machines failed (a killed run is interrupted, not failed)."""
        return self._cases_by_commit(label, machine_ids, RunStatus.FAILED)

    def _cases_by_commit(self, label: str, machine_ids: Collection[str], status: RunStatus,
                         *where: ColumnElement[bool]) -> dict[str, Counter[tuple[str, str]]]:
        query = (select(RunRow.kernel_commit, RunRow.benchmark, RunRow.case_key, RunRow.settings)
                 .where(RunRow.label == label, RunRow.machine_id.in_(list(machine_ids)),
                        RunRow.status == status, RunRow.kernel_commit.is_not(None), *where))
        found: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
        with self._session() as session:
            for commit, benchmark, case_key, settings in session.execute(query):
                if not (settings or {}).get("interleaved"):
                    found[commit][(benchmark, case_key)] += 1
        return dict(found)

    def runs_started(self, labels: Collection[str], since: datetime) -> tuple[int, datetime | None]:
        """How many runs with one of these labels started at or after `since`, and when
        the newest of all of them started (None: never)."""
        with self._session() as session:
            count = session.scalar(select(func.count(RunRow.id)).where(RunRow.label.in_(list(labels)),
                                                                       RunRow.started_at >= since))
            newest = session.scalar(select(func.max(RunRow.started_at)).where(RunRow.label.in_(list(labels))))
        return int(count or 0), aware(newest) if newest is not None else None

    def vm_kernels(self) -> list[str]:
        """The registered kernels that runs with samples booted, by name."""
        query = select(_VM_KERNEL).where(_VM_KERNEL.is_not(None), _HAS_SAMPLES).distinct().order_by(_VM_KERNEL)
        with self._session() as session:
            return list(session.scalars(query))

    def get_run(self, run_id: int) -> RunDetail:
        with self._session() as session:
            run = self._run(session, run_id)
            metrics = {
                row.name: _metric(row)
                for row in session.scalars(
                    select(MetricRow).where(MetricRow.name.in_({s.metric for s in run.samples}))
                )
            }
            samples = [Sample(s.repetition, metrics[s.metric], s.source, s.value) for s in run.samples]
            return _detail(run, samples, len({s.repetition for s in samples if s.source == "benchmark"}))

    def run_cases(self, run_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
        """Each run's benchmark and case key, in one query."""
        query = select(RunRow.id, RunRow.benchmark, RunRow.case_key).where(RunRow.id.in_(storable_ids(run_ids)))
        with self._session() as session:
            return {run_id: (benchmark, case_key) for run_id, benchmark, case_key in session.execute(query)}

    def get_runs(self, run_ids: Sequence[int]) -> RunsWithSamples:
        """Several runs in the order given, in three queries, and their samples as
        columns: a side of a comparison by label may hold thousands of runs."""
        with self._session() as session:
            rows = {run.id: run for run in session.scalars(select(RunRow).where(RunRow.id.in_(storable_ids(run_ids))))}
            missing = [i for i in run_ids if i not in rows]
            if missing:
                raise RunNotFound(f"no run with id {missing[0]} (see `perfline runs`)")
            metrics = {row.name: _metric(row) for row in session.scalars(select(MetricRow))}
            # By run, then as taken: the run_id index gives this order without a sort
            # (by id alone SQLite sorted 200,000 rows in a temporary B-tree, 0.15 s).
            query = (select(SampleRow.run_id, SampleRow.repetition, SampleRow.metric, SampleRow.source,
                            SampleRow.value).where(SampleRow.run_id.in_(list(run_ids)))
                     .order_by(SampleRow.run_id, SampleRow.id))
            # The driver's own tuples: these columns need no conversion, and SQLAlchemy's
            # Row objects cost a third of the time for 400,000 samples.
            cursor = cast(CursorResult[Any], session.connection().execute(query)).cursor
            samples = cursor.fetchall()
        repetitions = Counter(run for run, _ in {(s[0], s[1]) for s in samples if s[3] == "benchmark"})
        return RunsWithSamples([_detail(rows[i], [], repetitions[i]) for i in run_ids],
                               sample_columns(samples, metrics, run_ids))

    def profiled(self, run_ids: Sequence[int]) -> set[int]:
        """Which of these runs have a profile (perf-profile), in one query."""
        with self._session() as session:
            return set(session.scalars(select(ProfileEntryRow.run_id).distinct()
                                       .where(ProfileEntryRow.run_id.in_(list(run_ids)))))

    def metric_values(
        self,
        *,
        metric: str | None = None,
        benchmark: str | None = None,
        case_key: str | None = None,
        machine_id: str | None = None,
        since: datetime | None = None,
    ) -> list[RunValues]:
        """Benchmark values per run and metric, oldest run first (for series)."""
        # Core rows of the few columns a series needs, the runs' other columns read once
        # per run: ORM entities for a million samples took seconds (bench/store_scale.py).
        query = (
            select(SampleRow.run_id, SampleRow.metric, SampleRow.value)
            .join(RunRow, SampleRow.run_id == RunRow.id)
            .where(SampleRow.source == "benchmark")
            .order_by(RunRow.started_at, RunRow.id, SampleRow.id)
        )
        for column, value in (
            (SampleRow.metric, metric),
            (RunRow.benchmark, benchmark),
            (RunRow.case_key, case_key),
            (RunRow.machine_id, machine_id),
        ):
            if value is not None:
                query = query.where(column == value)
        if since is not None:
            query = query.where(RunRow.started_at >= since)
        grouped: dict[tuple[int, str], list[float]] = {}
        with self._session() as session:
            for run_id, name, sample in session.connection().execute(query).all():
                grouped.setdefault((run_id, name), []).append(sample)
            run_ids = sorted({run_id for run_id, _ in grouped})
            columns = (RunRow.id, RunRow.job, RunRow.benchmark, RunRow.case_key, RunRow.target, RunRow.kernel_release,
                       RunRow.hostname, RunRow.label, RunRow.kernel_commit, RunRow.status, RunRow.repeat,
                       RunRow.started_at, RunRow.finished_at, RunRow.machine_id,
                       RunRow.settings["interleaved"].as_string())
            runs = {}
            for start in range(0, len(run_ids), 5000):  # SQLite's bound-parameter limit
                chunk = run_ids[start:start + 5000]
                for row in session.connection().execute(select(*columns).where(RunRow.id.in_(chunk))).all():
                    runs[row[0]] = row
            metrics = {row.name: _metric(row) for row in session.scalars(select(MetricRow))}
        out = []
        for (run_id, name), values in grouped.items():
            r = runs[run_id]
            info = RunInfo(id=r[0], job=r[1], benchmark=r[2], case_key=r[3], target=r[4], kernel_release=r[5],
                           hostname=r[6], label=r[7], kernel_commit=r[8], status=r[9], samples=len(values),
                           repeat=r[10], started_at=aware(r[11]), finished_at=aware(r[12]) if r[12] else None)
            out.append(RunValues(info, r[13], metrics[name], values, interleaved=bool(r[14])))
        return out

    def record_regression(
        self, regression: Regression, near: Sequence[int] = (), claimed: Collection[int] = ()
    ) -> tuple[Regression, bool]:
        """Store a detected change unless it is known already; (record, newly created).

        Known: a record of the same series whose after-run is this one's, else one of
        the same kind whose after-run is in `near` (run ids, nearest first) and whose id
        is not in `claimed`. A known record still `new` takes this one's runs, change,
        interval and strength; one already judged stays as it is.
        """
        with self._session.begin() as session:
            candidates = session.scalars(
                select(RegressionRow).where(
                    RegressionRow.metric == regression.metric,
                    RegressionRow.benchmark == regression.benchmark,
                    RegressionRow.case_key == regression.case_key,
                    RegressionRow.machine_id == regression.machine_id,
                    RegressionRow.after_run_id.in_(sorted({regression.after_run_id, *near})),
                )
            ).all()
            rank = {run_id: i for i, run_id in reversed(list(enumerate(near)))}
            exact = [row for row in candidates if row.after_run_id == regression.after_run_id]
            nearby = sorted(
                (row for row in candidates
                 if row.kind == regression.kind and row.id not in claimed and row.after_run_id in rank),
                key=lambda row: (rank[row.after_run_id], row.id),
            )
            existing = (exact or nearby or [None])[0]  # type: ignore[list-item]
            if existing is not None:
                estimate = (regression.before_run_id, regression.after_run_id, regression.kind,
                            regression.change_pct, *regression.ci_pct, regression.strength)
                # Only a record nobody judged yet (regressions.NEW) follows the detector.
                if existing.status == "new" and estimate != _estimate(existing):
                    (existing.before_run_id, existing.after_run_id, existing.kind, existing.change_pct,
                     existing.ci_low_pct, existing.ci_high_pct, existing.strength) = estimate
                    if regression.tracker is not None:
                        existing.good, existing.bad = regression.good, regression.bad
                    existing.updated_at = _now()
                    session.flush()
                return _regression(existing), False
            now = _now()
            row = RegressionRow(
                metric=regression.metric,
                benchmark=regression.benchmark,
                case_key=regression.case_key,
                machine_id=regression.machine_id,
                before_run_id=regression.before_run_id,
                after_run_id=regression.after_run_id,
                kind=regression.kind,
                change_pct=regression.change_pct,
                ci_low_pct=regression.ci_pct[0],
                ci_high_pct=regression.ci_pct[1],
                strength=regression.strength,
                status=regression.status,
                note=regression.note,
                detected_at=now,
                updated_at=now,
                tracker=regression.tracker,
                good=regression.good,
                bad=regression.bad,
            )
            session.add(row)
            session.flush()
            return _regression(row), True

    def regressions(self, status: str | None = None, tracker: str | None = None,
                    metric: str | None = None) -> list[Regression]:
        query = select(RegressionRow).order_by(RegressionRow.id.desc())
        if metric is not None:
            query = query.where(RegressionRow.metric == metric)
        if status is not None:
            query = query.where(RegressionRow.status == status)
        if tracker is not None:
            query = query.where(RegressionRow.tracker == tracker)
        with self._session() as session:
            return [_regression(row) for row in session.scalars(query)]

    def get_regression(self, regression_id: int) -> Regression:
        with self._session() as session:
            row = by_id(session, RegressionRow, regression_id)
            if row is None:
                raise RunNotFound(f"no regression with id {regression_id} (see `perfline regressions`)")
            return _regression(row)

    def set_regression_status(self, regression_id: int, status: str, note: str | None) -> Regression:
        with self._session.begin() as session:
            row = by_id(session, RegressionRow, regression_id)
            if row is None:
                raise RunNotFound(f"no regression with id {regression_id} (see `perfline regressions`)")
            row.status, row.updated_at = status, _now()
            if note is not None:
                row.note = note
            session.flush()
            return _regression(row)

    def set_regression_narrowing(self, regression_id: int, *, bisection_id: int | None = None,
                                 culprit: str | None = None, culprit_subject: str | None = None,
                                 culprits: Sequence[Suspect] = ()) -> Regression:
        """Link the bisection that narrows a tracker's regression, then its culprit, or
        the range of commits it may be in (culprits; the culprit is then cleared)."""
        with self._session.begin() as session:
            row = by_id(session, RegressionRow, regression_id)
            if row is None:
                raise RunNotFound(f"no regression with id {regression_id} (see `perfline regressions`)")
            if bisection_id is not None:
                row.bisection_id = bisection_id
            if culprit is not None:
                row.culprit, row.culprit_subject, row.culprits = culprit, culprit_subject, None
            if culprits:
                row.culprit, row.culprit_subject = None, None
                row.culprits = [{"sha": c.sha, "subject": c.subject, "why": c.why} for c in culprits]
            row.updated_at = _now()
            session.flush()
            return _regression(row)

    def kernel_config(self, config_hash: str) -> str | None:
        with self._session() as session:
            row = session.get(KernelConfig, config_hash)
            return row.content if row else None

    def _run(self, session: Session, run_id: int) -> RunRow:
        run = by_id(session, RunRow, run_id)
        if run is None:
            raise RunNotFound(f"no run with id {run_id} (see `perfline runs`)")
        return run

    def _ensure_config(self, session: Session, fingerprint: Fingerprint) -> str | None:
        """Store the fingerprint's kernel config once per distinct content; its hash."""
        config_hash = fingerprint.config_hash
        if config_hash is not None and session.get(KernelConfig, config_hash) is None:
            _insert_once(session, KernelConfig, hash=config_hash, source=fingerprint.config_source or "",
                         content=fingerprint.kernel_config or "")
        return config_hash

    def _ensure_metrics(self, session: Session, metrics: Iterable[Metric]) -> None:
        for metric in {m.name: m for m in metrics}.values():
            if metric.name in self._known_metrics:
                continue
            if session.get(MetricRow, metric.name) is None:
                _insert_once(session, MetricRow, name=metric.name, unit=metric.unit,
                             direction=metric.direction.value, description=metric.description)
            self._known_metrics.add(metric.name)


def _insert_once(session: Session, table: type[KernelConfig | MetricRow], **values: Any) -> None:
    """Insert a row keyed by content unless it is there: machines of a fleet running the
    same kernel or benchmark for the first time insert the same key at the same moment."""
    insert_ignoring_conflicts(session, table, [values])

def _by_repetition(rows: Iterable[tuple[int, K, float]]) -> list[dict[K, float]]:
    """(repetition, key, share) rows as one share table per repetition, in order."""
    reps: dict[int, dict[K, float]] = defaultdict(dict)
    for repetition, key, share in rows:
        reps[repetition][key] = share
    return [reps[r] for r in sorted(reps)]


def _now() -> datetime:
    return datetime.now(UTC)


def _estimate(row: RegressionRow) -> tuple[Any, ...]:
    return (row.before_run_id, row.after_run_id, row.kind, row.change_pct,
            row.ci_low_pct, row.ci_high_pct, row.strength)


def _regression(row: RegressionRow) -> Regression:
    return Regression(
        id=row.id,
        metric=row.metric,
        benchmark=row.benchmark,
        case_key=row.case_key,
        machine_id=row.machine_id,
        before_run_id=row.before_run_id,
        after_run_id=row.after_run_id,
        kind=row.kind,
        change_pct=row.change_pct,
        ci_pct=(row.ci_low_pct, row.ci_high_pct),
        strength=row.strength,
        status=row.status,
        note=row.note,
        detected_at=aware(row.detected_at),
        updated_at=aware(row.updated_at),
        tracker=row.tracker,
        good=row.good,
        bad=row.bad,
        bisection_id=row.bisection_id,
        culprit=row.culprit,
        culprit_subject=row.culprit_subject,
        culprits=tuple(Suspect(c["sha"], c["subject"], c["why"]) for c in row.culprits or ()),
        triage=row.triage or "untriaged",
        owner=row.owner,
        due=row.due,
    )


def sample_columns(samples: Iterable[tuple[int, int, str, str, float]], metrics: Mapping[str, Metric],
                   run_ids: Sequence[int]) -> dict[str, SampleColumns]:
    """Samples (run id, repetition, metric name, source, value), each run's in the order
    taken, as columns by metric: the runs in the order of `run_ids`, the metrics in the
    order they first appear then.

    Per-sample objects, and a Python list per metric and side, cost 0.45 s of a
    comparison of 2,000 runs a side (400,000 samples; bench/store_scale.py)."""
    import numpy as np  # not above: most users of the store never need it

    position = {run_id: i for i, run_id in enumerate(run_ids)}
    # Stable: each run's samples keep their order (a no-op when they come in run order).
    ordered = sorted(samples, key=lambda sample: position[sample[0]])
    gathered: dict[str, tuple[str, list[float], list[int]]] = {}
    for run_id, _, name, source, value in ordered:
        found = gathered.get(name)
        if found is None:
            found = gathered[name] = (source, [], [])
        found[1].append(value)
        found[2].append(run_id)
    return {name: SampleColumns(metrics[name], source, np.array(values, dtype=float), np.array(runs, dtype=np.int64))
            for name, (source, values, runs) in gathered.items()}


def _detail(run: RunRow, samples: list[Sample], repetitions: int) -> RunDetail:
    return RunDetail(info=_info(run, repetitions), params=run.params, tunables=run.tunables, monitors=run.monitors,
                     settings=run.settings, fingerprint=run.fingerprint, error=run.error,
                     output_tail=run.output_tail, samples=samples)


def _metric(row: MetricRow) -> Metric:
    return Metric(row.name, row.unit, Direction(row.direction), row.description)


def _info(run: RunRow, samples: int) -> RunInfo:
    return RunInfo(
        id=run.id,
        job=run.job,
        benchmark=run.benchmark,
        case_key=run.case_key,
        target=run.target,
        kernel_release=run.kernel_release,
        hostname=run.hostname,
        label=run.label,
        kernel_commit=run.kernel_commit,
        status=run.status,
        samples=samples,
        repeat=run.repeat,
        started_at=aware(run.started_at),
        finished_at=aware(run.finished_at) if run.finished_at else None,
    )



