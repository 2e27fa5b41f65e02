"""Schema migrations: every store is brought to the newest schema when it is opened."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection) -> None:
    command.upgrade(alembic_config(connection), "head")


def revision(connection: Connection, message: str) -> None:
    """Write a new migration from the difference between schema.py and the database."""
    command.revision(alembic_config(connection), message=message, autogenerate=True)
