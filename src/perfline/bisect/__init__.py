"""Noise-aware bisection of a performance change to the commit that caused it.

`Bisection` is the pure core: it turns recorded samples into a posterior over the first
bad commit and says which commit to measure next; `ABConfirmation` checks the culprit
against its parent afterwards. Building commits and running benchmarks is the caller's.
See docs/bisect.md.
"""

from perfline.bisect.bisection import Bisection, BisectResult, Kind, Observation, Status
from perfline.bisect.confirm import ABConfirmation, Confirmation, Decision

__all__ = [
    "ABConfirmation",
    "BisectResult",
    "Bisection",
    "Confirmation",
    "Decision",
    "Kind",
    "Observation",
    "Status",
]
