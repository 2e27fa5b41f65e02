"""ftrace-events: the seed's loop with a trace event enabled and disabled instead of a tracer.

Enabling an event attaches a probe to its tracepoint; when the tracepoint had just lost
its last probe (the disable before), the kernel first waits for an RCU grace period
(tp_rcu_cond_sync in kernel/tracepoint.c) so no CPU can still be running the old probe.
The loop is therefore grace-period-bound like ftrace-switch, and its wall time follows
RCU latency (rcutree.jiffies_till_first_fqs, CONFIG_RCU_* options) more than CPU speed.
Kernels under lockdown that refuse the function tracer still allow events, so this runs
the seed's experiment where ftrace-switch cannot.
"""

from __future__ import annotations

import difflib
from typing import Any

from perfline.benchmarks.base import BenchmarkUnavailable, Param
from perfline.benchmarks.tracefs import TracefsCycle, refusal
from perfline.records.metric import Direction, Metric
from perfline.system.kernel_state import KernelStateError


def event_path(name: str) -> str:
    """'sched/sched_switch' as the events/ directory names it; available_events' 'sched:x' too."""
    return name.strip().replace(":", "/", 1)


def parse_available_events(text: str) -> list[str]:
    """available_events ('sched:sched_switch' lines) as events/ paths ('sched/sched_switch')."""
    return [event_path(line) for line in text.splitlines() if line.strip()]


class FtraceEvents(TracefsCycle):
    name = "ftrace-events"
    summary = "wall time to enable and disable a trace event and toggle tracing_on, N times (RCU)"
    params = (
        Param("iterations", int, 100, "times the event is enabled and disabled", minimum=1),
        Param(
            "event",
            str,
            "sched/sched_switch",
            "trace event as system/name (a line of available_events, ':' or '/')",
        ),
    )
    metrics = (
        Metric(
            "ftrace-events.seconds",
            "s",
            Direction.LOWER,
            "wall time of all iterations of enable 1, tracing_on 1 and 0, enable 0, "
            "tracing_on 1 and 0",
        ),
    )

    @property
    def event(self) -> str:
        return event_path(str(self.values["event"]))

    listing = "available_events"

    def prepare(self, listing: str) -> tuple[str, list[str]]:
        event = self.event
        available = parse_available_events(listing)
        if event not in available:
            close = difflib.get_close_matches(event, available, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}?" if close else "see available_events"
            raise BenchmarkUnavailable(
                f"ftrace-events: unknown trace event {event!r} "
                f"(not in {self.tracefs / 'available_events'}): {hint}"
            )
        return f"events/{event}/enable", ["1", "0"]

    def refused(self, value: str, exc: OSError | KernelStateError) -> str:
        action = "enabling" if value == "1" else "disabling"
        return f"the kernel refused {action} the {self.event} event ({refusal(exc, self.kernel)})"

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "event": self.event}
