"""The run loop."""

from perfline.runner.loop import Observer, RunContext, RunOutcome, execute, terminate_as_interrupt

__all__ = ["Observer", "RunContext", "RunOutcome", "execute", "terminate_as_interrupt"]
