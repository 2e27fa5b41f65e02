"""The result store (SQLite by default, any SQLAlchemy URL such as PostgreSQL)."""

from perfline.store.engine import StoreUnavailable, resolve_url
from perfline.store.store import (
    Regression,
    RunDetail,
    RunInfo,
    RunNotFound,
    RunsWithSamples,
    RunValues,
    Sample,
    SampleColumns,
    Store,
    Suspect,
    sample_columns,
)

__all__ = [
    "Regression",
    "RunDetail",
    "RunInfo",
    "RunNotFound",
    "RunValues",
    "RunsWithSamples",
    "Sample",
    "SampleColumns",
    "Store",
    "StoreUnavailable",
    "Suspect",
    "resolve_url",
    "sample_columns",
]
