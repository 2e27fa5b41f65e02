"""Schema migrations: every store is brought to the newest schema when it is opened."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")


class UnknownRevision(Exception):
    """The store's schema revision is none of this perfline's migrations: a newer perfline
    wrote it, and alembic cannot bring it down nor this code read it."""

    def __init__(self, found: str, head: str) -> None:
        super().__init__(f"its schema is at revision {found}, which this perfline (schema {head}) does not know: "
                         "a newer perfline wrote it; open it with that version or upgrade perfline")


def alembic_config(connection: Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection) -> None:
    # A store already at the head is the common case: alembic's import (with the
    # PostgreSQL dialect it loads) and its reading of every migration cost 0.12 s CPU
    # of each command's start-up on the 2-vCPU VM, for nothing to do.
    if at_head(connection):
        return
    if connection.dialect.name == "sqlite":
        # pysqlite runs DDL outside any transaction unless one was begun, so a kill in
        # the middle of a migration left half a schema, and every later open failed
        # ("table kernel_configs already exists", bench/track_chaos.py). SQLite's DDL is
        # transactional: the whole upgrade is one transaction, committed with the
        # connection's, and IMMEDIATE makes a second opener wait, then find it done.
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        if at_head(connection):
            return
    from alembic import command

    command.upgrade(alembic_config(connection), "head")


def at_head(connection: Connection) -> bool:
    """Whether the store is at this perfline's newest schema. A store whose revision no
    migration here has is refused (UnknownRevision) before alembic is loaded: alembic's
    own refusal reached the user as an internal error with a traceback."""
    current = current_revision(connection)
    if current is not None and current not in revisions():
        raise UnknownRevision(current, head_revision())
    return current == head_revision()


def revisions() -> set[str]:
    """Every migration's revision: each file is named after its revision, NNNN_what.py,
    each revising the one before (tests/test_store.py checks it against alembic's)."""
    return {path.name.split("_")[0] for path in (MIGRATIONS / "versions").glob("[0-9]*.py")}


def head_revision() -> str:
    """The newest migration's revision (tests/test_store.py checks it against alembic's head)."""
    return max(revisions())


def current_revision(connection: Connection) -> str | None:
    """The store's revision; None for a store without one (new)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def revision(connection: Connection, message: str) -> None:
    """Write a new migration from the difference between schema.py and the database."""
    from alembic import command

    command.revision(alembic_config(connection), message=message, autogenerate=True)
