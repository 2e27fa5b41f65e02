"""The result store's tables. Changing them needs a migration under migrations/versions."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON, datetime: DateTime(timezone=True)}


class KernelConfig(Base):
    """Each distinct kernel .config once: a config is ~250 KB and rarely changes."""

    __tablename__ = "kernel_configs"
    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    source: Mapped[str] = mapped_column(String(256))
    content: Mapped[str] = mapped_column(Text)


class MetricRow(Base):
    __tablename__ = "metrics"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    unit: Mapped[str] = mapped_column(String(32))
    direction: Mapped[str] = mapped_column(String(8))
    description: Mapped[str] = mapped_column(Text, default="")


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job: Mapped[str] = mapped_column(String(200), index=True)
    benchmark: Mapped[str] = mapped_column(String(100), index=True)
    case_key: Mapped[str] = mapped_column(Text)
    params: Mapped[dict[str, Any]]
    tunables: Mapped[dict[str, Any]]
    monitors: Mapped[list[Any]]
    target: Mapped[str] = mapped_column(String(50))
    label: Mapped[str | None] = mapped_column(String(200), index=True)
    kernel_commit: Mapped[str | None] = mapped_column(String(100), index=True)
    hostname: Mapped[str] = mapped_column(String(255))
    machine_id: Mapped[str] = mapped_column(String(64), index=True)
    kernel_release: Mapped[str] = mapped_column(String(255), index=True)
    fingerprint: Mapped[dict[str, Any]]
    config_hash: Mapped[str | None] = mapped_column(ForeignKey("kernel_configs.hash"))
    settings: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16), index=True)
    error: Mapped[str | None] = mapped_column(Text)
    output_tail: Mapped[str | None] = mapped_column(Text)
    repeat: Mapped[int] = mapped_column(Integer)
    warmup: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(index=True)
    finished_at: Mapped[datetime | None]
    # With boot_id, lets a later command tell a run whose process was SIGKILLed.
    pid: Mapped[int] = mapped_column(Integer)
    boot_id: Mapped[str] = mapped_column(String(64))
    perfline_version: Mapped[str] = mapped_column(String(32))

    samples: Mapped[list[SampleRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="SampleRow.id"
    )


class SampleRow(Base):
    __tablename__ = "samples"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    repetition: Mapped[int] = mapped_column(Integer)
    metric: Mapped[str] = mapped_column(ForeignKey("metrics.name"), index=True)
    # "benchmark" or "monitor": monitors describe the system, benchmarks score it.
    source: Mapped[str] = mapped_column(String(16))
    value: Mapped[float] = mapped_column(Float)
    taken_at: Mapped[datetime]

    run: Mapped[RunRow] = relationship(back_populates="samples")


class ProfileEntryRow(Base):
    """One symbol of one repetition's profile: the top symbols only, not every sample."""

    __tablename__ = "profile_entries"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    repetition: Mapped[int] = mapped_column(Integer)
    # Text: demangled C++ names run to hundreds of characters.
    symbol: Mapped[str] = mapped_column(Text)
    dso: Mapped[str] = mapped_column(Text)
    kernel: Mapped[bool] = mapped_column(Boolean)
    share_pct: Mapped[float] = mapped_column(Float)


class ProfileChainRow(Base):
    """One call chain of one repetition's profile: the top chains only, not every stack."""

    __tablename__ = "profile_chains"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    repetition: Mapped[int] = mapped_column(Integer)
    # The chain as one folded stack (records.profile.Chain.folded), outermost caller first.
    stack: Mapped[str] = mapped_column(Text)
    # The leaf's binary.
    dso: Mapped[str] = mapped_column(Text)
    share_pct: Mapped[float] = mapped_column(Float)


class RegressionRow(Base):
    """A change point judged by the metric's direction, with what was done about it."""

    __tablename__ = "regressions"
    __table_args__ = (
        # One record per change, however often detection runs over the same history.
        UniqueConstraint("metric", "benchmark", "case_key", "machine_id", "after_run_id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    metric: Mapped[str] = mapped_column(ForeignKey("metrics.name"), index=True)
    benchmark: Mapped[str] = mapped_column(String(100))
    case_key: Mapped[str] = mapped_column(Text)
    machine_id: Mapped[str] = mapped_column(String(64))
    # The last run before the change and the first after it.
    before_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    after_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))  # regression | improvement | change
    change_pct: Mapped[float] = mapped_column(Float)
    ci_low_pct: Mapped[float] = mapped_column(Float)
    ci_high_pct: Mapped[float] = mapped_column(Float)
    strength: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16), index=True)
    note: Mapped[str | None] = mapped_column(Text)
    detected_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # Set when a tracker found it: the tracker, the tested commits around the change,
    # the bisection that narrowed it and the commit it found.
    tracker: Mapped[str | None] = mapped_column(String(100), index=True)
    good: Mapped[str | None] = mapped_column(String(64))
    bad: Mapped[str | None] = mapped_column(String(64))
    bisection_id: Mapped[int | None] = mapped_column(ForeignKey("bisections.id", ondelete="SET NULL"))
    culprit: Mapped[str | None] = mapped_column(String(64))
    culprit_subject: Mapped[str | None] = mapped_column(Text)
    # A bisection that ended on a range (a commit next to the change could not be built
    # or run): each commit the change may be in, {"sha", "subject", "why"}; culprit empty.
    culprits: Mapped[list[Any] | None] = mapped_column(JSON)
    # Triage by people (the dashboard), beside the tracker's own status: Perfherder's
    # states, an owner and a due date.
    triage: Mapped[str] = mapped_column(String(16), default="untriaged", server_default="untriaged")
    owner: Mapped[str | None] = mapped_column(String(200))
    due: Mapped[date | None] = mapped_column(Date)


class RegressionEventRow(Base):
    """Who changed what of a regression's triage, and when: its history."""

    __tablename__ = "regression_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    regression_id: Mapped[int] = mapped_column(ForeignKey("regressions.id", ondelete="CASCADE"), index=True)
    at: Mapped[datetime]
    who: Mapped[str] = mapped_column(String(200))
    field: Mapped[str] = mapped_column(String(16))
    old: Mapped[str | None] = mapped_column(Text)
    new: Mapped[str | None] = mapped_column(Text)


class TrackerRow(Base):
    """A tracker (`perfline track`): its file and what its first run fixed for good."""

    __tablename__ = "trackers"
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    file: Mapped[str] = mapped_column(Text)
    repo: Mapped[str] = mapped_column(Text)
    branch: Mapped[str] = mapped_column(String(200))
    # `since` resolved on the first run and kept, so the selection does not slide.
    since: Mapped[str] = mapped_column(String(64))
    head: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class CommitRow(Base):
    """A commit's subject, author and date, kept when a tracker first sees it: reports and
    pages name it after the repository is gone, and a dashboard server has no checkout."""

    __tablename__ = "commits"
    sha: Mapped[str] = mapped_column(String(64), primary_key=True)
    subject: Mapped[str] = mapped_column(Text)
    author: Mapped[str] = mapped_column(Text)
    # As git wrote it (ISO 8601 with the committer's offset), which a timestamp column
    # on SQLite would not keep.
    date: Mapped[str | None] = mapped_column(String(40))
    seen_at: Mapped[datetime]


class DailyNumberRow(Base):
    """The tracker's one number per tested commit (docs/track.md)."""

    __tablename__ = "daily_numbers"
    __table_args__ = (UniqueConstraint("tracker", "commit"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tracker: Mapped[str] = mapped_column(ForeignKey("trackers.name", ondelete="CASCADE"), index=True)
    commit: Mapped[str] = mapped_column(String(64))
    position: Mapped[int] = mapped_column(Integer)  # first-parent index from `since`
    subject: Mapped[str] = mapped_column(Text)
    value: Mapped[float] = mapped_column(Float)
    low: Mapped[float] = mapped_column(Float)
    high: Mapped[float] = mapped_column(Float)
    tested_at: Mapped[datetime]


class OutboxRow(Base):
    """A report to mail, kept until it is sent: a mail server that is down loses nothing."""

    __tablename__ = "outbox"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # What it reports, e.g. `regression-12` or `daily-demo-2026-11-25`: each once.
    key: Mapped[str] = mapped_column(String(200), unique=True)
    recipients: Mapped[list[Any]]
    subject: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    html: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    sent_at: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)


class BisectionRow(Base):
    """A bisection's definition; its progress is the samples and builds below it."""

    __tablename__ = "bisections"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(Text)
    good: Mapped[str] = mapped_column(String(64))
    bad: Mapped[str] = mapped_column(String(64))
    # The commits, good first, bad last, as full hashes: indexes below refer to them.
    commits: Mapped[list[Any]]
    build: Mapped[str] = mapped_column(Text)
    command: Mapped[str | None] = mapped_column(Text)
    job: Mapped[str | None] = mapped_column(Text)
    metric: Mapped[str] = mapped_column(String(200))
    direction: Mapped[str] = mapped_column(String(8))
    max_runs: Mapped[int] = mapped_column(Integer)
    # Set for a kernel bisection (--kernel-tree): the config copy every build uses, and
    # the file it was copied from (unknown for bisections started before this column).
    kernel_config: Mapped[str | None] = mapped_column(Text)
    kernel_config_source: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class BisectSampleRow(Base):
    __tablename__ = "bisect_samples"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bisection_id: Mapped[int] = mapped_column(
        ForeignKey("bisections.id", ondelete="CASCADE"), index=True
    )
    commit_index: Mapped[int] = mapped_column(Integer)
    # "bisect" feeds the posterior; "confirm" is the fresh A/B of culprit and parent.
    phase: Mapped[str] = mapped_column(String(8))
    value: Mapped[float] = mapped_column(Float)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    taken_at: Mapped[datetime]


class BisectBuildRow(Base):
    __tablename__ = "bisect_builds"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bisection_id: Mapped[int] = mapped_column(
        ForeignKey("bisections.id", ondelete="CASCADE"), index=True
    )
    commit_index: Mapped[int] = mapped_column(Integer)
    ok: Mapped[bool] = mapped_column(Boolean)
    seconds: Mapped[float] = mapped_column(Float)
    log_tail: Mapped[str] = mapped_column(Text)


class FleetMachineRow(Base):
    """A test machine of the fleet (`perfline worker`): what it is, when it was last
    heard from, and whether it may take jobs (`hold`)."""

    __tablename__ = "fleet_machines"
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    machine_class: Mapped[str] = mapped_column(String(200), index=True)
    cpu_model: Mapped[str] = mapped_column(Text)
    cpus: Mapped[int] = mapped_column(Integer)
    memory_bytes: Mapped[int] = mapped_column(BigInteger)
    kernel: Mapped[str] = mapped_column(String(255))
    hostname: Mapped[str] = mapped_column(String(255))
    # /etc/machine-id, as its runs' fingerprints have it: a class's runs by machine.
    machine_id: Mapped[str] = mapped_column(String(64))
    registered_at: Mapped[datetime]
    last_seen: Mapped[datetime]
    # procrastinate's id of the worker serving it now; None when no worker runs.
    worker_id: Mapped[int | None] = mapped_column(BigInteger)
    job_id: Mapped[int | None] = mapped_column(BigInteger)  # the job it runs now
    # None: takes jobs; `drain`, `bad` or `retired`: takes none until `fleet enable`.
    hold: Mapped[str | None] = mapped_column(String(16))
    hold_reason: Mapped[str | None] = mapped_column(Text)
    # The last health job: the pace loop's time (ns) and when; jobs run since.
    pace_ns: Mapped[int | None] = mapped_column(BigInteger)
    health_at: Mapped[datetime | None]
    jobs_since_health: Mapped[int] = mapped_column(Integer, default=0)


class FleetAttemptRow(Base):
    """One attempt at a queued fleet job on one machine, and its run. The job itself is
    procrastinate's row (`procrastinate_jobs`, no foreign key: that schema is the
    queue's); a job counts as done once, through the one attempt that ends `succeeded`."""

    __tablename__ = "fleet_attempts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(BigInteger, index=True)
    machine: Mapped[str] = mapped_column(String(100), index=True)
    worker_id: Mapped[int | None] = mapped_column(BigInteger)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    # running, succeeded, failed, interrupted (SIGTERM, back to the queue), stale (its
    # machine stopped heartbeating and the job was queued again)
    state: Mapped[str] = mapped_column(String(16), index=True)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]


class KexecBootRow(Base):
    """One boot of this machine into a kernel under test (target kexec): written before
    the machine goes down, so that `perfline resume` knows after the boot what to run,
    and on which kernel. States: pending (staged; the machine is going down), booted (the
    right kernel came up; measuring), measured (runs stored; back to the default kernel),
    returned (the default kernel runs again), abandoned (given up, or the boot never
    started), boot-failed (another kernel came up: the
    tested one did not boot, or died; `console` holds what was left of its messages)."""

    __tablename__ = "kexec_boots"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    machine_id: Mapped[str] = mapped_column(String(64), index=True)
    hostname: Mapped[str] = mapped_column(String(255))
    kernel: Mapped[str] = mapped_column(String(100))  # its name in the kernel registry
    release: Mapped[str] = mapped_column(String(255))
    banner: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    cmdline: Mapped[str] = mapped_column(Text)
    token: Mapped[str] = mapped_column(String(64))
    # The kernel the machine comes back to, as it ran when the boot was planned.
    default_release: Mapped[str] = mapped_column(String(255))
    cases: Mapped[list[Any]]
    label: Mapped[str | None] = mapped_column(String(200))
    kernel_commit: Mapped[str | None] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(16), index=True)
    boot_id_before: Mapped[str] = mapped_column(String(64))
    boot_id_after: Mapped[str | None] = mapped_column(String(64))
    run_ids: Mapped[list[Any]]
    console: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # The fleet job attempt (fleet_attempts.id) the boot is for, when a worker booted it
    # for a kernel job: `perfline resume` ends that attempt and its job.
    fleet_attempt: Mapped[int | None] = mapped_column(Integer, index=True)
    # How the machine was booted: `kexec`, or `reboot` through the boot loader's one-shot
    # entry (where kexec was refused and the job allowed it).
    how: Mapped[str] = mapped_column(String(16), server_default="kexec")
    # The series (kexec_series.id) the boot is one block of, and which block.
    series_id: Mapped[int | None] = mapped_column(Integer, index=True)
    series_step: Mapped[int | None] = mapped_column(Integer)
    # Which watchdog guarded the boot (a job's `watchdog:`), in words; NULL before it was recorded.
    watchdog: Mapped[str | None] = mapped_column(Text)


class KexecSeriesRow(Base):
    """Several boots of one machine that make one answer: an `ab` whose sides run on
    different kernels, one boot per block of repetitions, the blocks interleaved. `steps`
    holds each block's side and case; `perfline resume` plans the next block's boot when
    the machine is back on its default kernel. States: open, done, failed, abandoned."""

    __tablename__ = "kexec_series"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    machine_id: Mapped[str] = mapped_column(String(64), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    steps: Mapped[list[Any]]
    # What the answer needs at the end (ab: alpha, floor, metric floors).
    settings: Mapped[dict[str, Any]]
    label: Mapped[str | None] = mapped_column(String(200))
    kernel_commit: Mapped[str | None] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(16), index=True)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
