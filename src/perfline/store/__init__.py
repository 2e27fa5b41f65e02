"""The result store (SQLite by default, any SQLAlchemy URL such as PostgreSQL)."""

from perfline.store.engine import StoreUnavailable, resolve_url
from perfline.store.store import (
    Regression,
    RunDetail,
    RunInfo,
    RunNotFound,
    RunValues,
    Sample,
    Store,
)

__all__ = [
    "Regression",
    "RunDetail",
    "RunInfo",
    "RunNotFound",
    "RunValues",
    "Sample",
    "Store",
    "StoreUnavailable",
    "resolve_url",
]
