"""Where the store lives and how to connect to it."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import CursorResult, Engine, Update, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from perfline.records.errors import UserError
from perfline.system.patience import patiently
from perfline.system.signals import signals_held

log = logging.getLogger(__name__)

T = TypeVar("T")


class StoreUnavailable(UserError):
    """The store at a URL cannot be opened; says which store (password hidden) and why."""

    def __init__(self, url: str, cause: BaseException) -> None:
        super().__init__(f"cannot open the store: {_reason(cause)}", _shown(url))


def _shown(url: str) -> str:
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _reason(cause: BaseException) -> str:
    if isinstance(cause, DBAPIError):
        # The driver's first line is the reason ("file is not a database", "connection
        # refused"); SQLAlchemy's wrapper adds the SQL and a link, which help nobody here.
        text = str(cause.orig).strip().splitlines()[0] if cause.orig is not None else str(cause)
        if "not a database" in text:
            return f"{text}; point --db or $PERFLINE_DB at a perfline store or at a new file"
        if cause.connection_invalidated or "connect" in text.lower() or "refused" in text.lower():
            return f"{text}; is the server running and the URL right?"
        return text
    if isinstance(cause, OSError):
        return f"{cause.strerror or cause}" + (f": {cause.filename}" if cause.filename else "")
    return str(cause)


def resolve_url(location: str | None = None) -> str:
    """`location` or $PERFLINE_DB (an SQLAlchemy URL or an SQLite file path), else the
    user's data directory."""
    configured = location or os.environ.get("PERFLINE_DB")
    if configured:
        return configured if "://" in configured else sqlite_url(Path(configured))
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return sqlite_url(data_home / "perfline" / "perfline.db")


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path.expanduser().resolve()}"


def connect(url: str, outage_wait_s: float = 0.0) -> Engine:
    """An engine for `url`. With `outage_wait_s`, a server that does not answer is waited
    for that long before a connection fails (a fleet worker rides out a restart)."""
    if url.startswith("sqlite"):
        database = url.split(":///", 1)[-1]
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_engine(url, pool_pre_ping=True)
    if outage_wait_s > 0:
        event.listen(engine, "do_connect", _patient_connect(outage_wait_s))
    return engine


def _patient_connect(wait_s: float) -> Callable[..., Any]:
    # Said once per outage, as the fleet queue says its own: a worker's writes can ride
    # out a restart entirely in here, and its log should still show that it waited.
    waiting = False

    def lost(exc: BaseException) -> None:
        nonlocal waiting
        if not waiting:
            log.warning("store: the database does not answer (%s); waiting", str(exc).strip().splitlines()[0])
        waiting = True

    def do_connect(dialect: Any, _record: Any, cargs: tuple[Any, ...], cparams: dict[str, Any]) -> Any:
        nonlocal waiting
        dbapi = dialect.loaded_dbapi
        connection = patiently(lambda: dbapi.connect(*cargs, **cparams),
                               lambda exc: isinstance(exc, dbapi.OperationalError), wait_s, lost)
        if waiting:
            waiting = False
            log.warning("store: the database answers again")
        return connection

    return do_connect


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets `perfline show` read while a run writes; FULL makes each committed
    # sample survive a power cut, which costs microseconds per sample.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


Row = TypeVar("Row")
# Every id the store hands out is a 64-bit signed integer (SQLite's and PostgreSQL's
# bigint); a larger one from the command line or a URL names no row, and binding it would
# raise OverflowError inside the driver.
_ID_RANGE = range(-(2**63), 2**63)


def by_id(session: Session, model: type[Row], ident: int) -> Row | None:
    """The row with this id, or None: also for an id no row can have."""
    return session.get(model, ident) if ident in _ID_RANGE else None


def storable_ids(ids: Iterable[int]) -> list[int]:
    """The ids a row can have, for `IN (...)` queries: the rest name nothing."""
    return [i for i in ids if i in _ID_RANGE]


def insert_ignoring_conflicts(session: Session, table: Any, rows: list[dict[str, Any]]) -> None:
    """INSERT … ON CONFLICT DO NOTHING, in the session's dialect: rows keyed by content that
    machines of a fleet (or two trackers) may insert at the same moment."""
    # Each dialect's insert imported here: SQLite stores never load PostgreSQL's (0.04 s).
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
    session.execute(insert(table).values(rows).on_conflict_do_nothing())


def aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything perfline writes is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class Sessions:
    """The store's sessions: plain ones to read; `begin()` to write, with Ctrl-C and
    SIGTERM held until the transaction is committed or rolled back (system.signals);
    `write()` for the run loop's writes, which survive the server restarting."""

    def __init__(self, factory: sessionmaker[Session], outage_wait_s: float = 0.0) -> None:
        self._factory = factory
        self._outage_wait_s = outage_wait_s

    def write(self, work: Callable[[Session, bool], T]) -> T:
        """`work(session, retried)` in a transaction. When the connection to the server
        is lost in it (a restart), the transaction is rolled back and `work` runs again on
        a new connection, which waits for the server (`connect`'s outage_wait_s); `retried`
        lets it first undo what a commit whose answer was lost may have written."""
        deadline = time.monotonic() + self._outage_wait_s
        retried = False
        while True:
            try:
                with self.begin() as session:
                    return work(session, retried)
            except DBAPIError as exc:
                if not exc.connection_invalidated or time.monotonic() > deadline:
                    raise
                retried = True

    def __call__(self) -> Session:
        return self._factory()

    @contextmanager
    def begin(self) -> Iterator[Session]:
        with signals_held(), self._factory.begin() as session:
            yield session


def updated(session: Session, statement: Update) -> int:
    """How many rows an UPDATE changed: a conditional update's answer to "was it me?"."""
    return cast(CursorResult[Any], session.execute(statement)).rowcount
