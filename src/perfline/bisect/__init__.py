"""Noise-aware bisection of a performance change to the commit that caused it.

`Bisection` is the pure core: it turns recorded samples into a posterior over the first
bad commit and says which commit to measure next, the probes of its `ABConfirmation`
of the culprit against its parent included. Building commits and running benchmarks is
the caller's.
See docs/bisect.md.

The names below are loaded on first use (PEP 562): the core needs scipy, which costs a
second at start-up, and `perfline` imports this package for every command.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Bisection": "perfline.bisect.bisection",
    "BisectResult": "perfline.bisect.bisection",
    "Kind": "perfline.bisect.bisection",
    "Observation": "perfline.bisect.bisection",
    "ABConfirmation": "perfline.bisect.confirm",
    "Confirmation": "perfline.bisect.confirm",
    "Decision": "perfline.bisect.confirm",
}

__all__ = ["ABConfirmation", "BisectResult", "Bisection", "Confirmation", "Decision", "Kind", "Observation"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'perfline.bisect' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
