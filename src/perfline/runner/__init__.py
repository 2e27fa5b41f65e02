"""The run loop."""

from perfline.runner.loop import (
    CaseRun,
    Observer,
    RunContext,
    RunOutcome,
    execute,
    execute_interleaved,
    terminate_as_interrupt,
)

__all__ = [
    "CaseRun",
    "Observer",
    "RunContext",
    "RunOutcome",
    "execute",
    "execute_interleaved",
    "terminate_as_interrupt",
]
