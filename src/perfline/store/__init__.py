"""The result store (SQLite by default, any SQLAlchemy URL such as PostgreSQL)."""

from perfline.store.engine import resolve_url
from perfline.store.store import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    RUNNING,
    RunDetail,
    RunInfo,
    RunNotFound,
    Sample,
    Store,
)

__all__ = [
    "COMPLETED",
    "FAILED",
    "INTERRUPTED",
    "RUNNING",
    "RunDetail",
    "RunInfo",
    "RunNotFound",
    "Sample",
    "Store",
    "resolve_url",
]
