"""Schema migrations: every store is brought to the newest schema when it is opened."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")


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
    if current_revision(connection) == head_revision():
        return
    if connection.dialect.name == "sqlite":
        # pysqlite runs DDL outside any transaction unless one was begun, so a kill in
        # the middle of a migration left half a schema, and every later open failed
        # ("table kernel_configs already exists", bench/track_chaos.py). SQLite's DDL is
        # transactional: the whole upgrade is one transaction, committed with the
        # connection's, and IMMEDIATE makes a second opener wait, then find it done.
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        if current_revision(connection) == head_revision():
            return
    from alembic import command

    command.upgrade(alembic_config(connection), "head")


def head_revision() -> str:
    """The newest migration's revision: each file is named after its revision, NNNN_what.py,
    each revising the one before (tests/test_store.py checks it against alembic's head)."""
    return max(path.name for path in (MIGRATIONS / "versions").glob("[0-9]*.py")).split("_")[0]


def current_revision(connection: Connection) -> str | None:
    """The store's revision; None for a store without one (new)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def revision(connection: Connection, message: str) -> None:
    """Write a new migration from the difference between schema.py and the database."""
    from alembic import command

    command.revision(alembic_config(connection), message=message, autogenerate=True)
