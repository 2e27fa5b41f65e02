"""ftrace-switch: the tracer-switching loop that exposed an RCU grace-period regression.

Switching tracers waits for RCU grace periods, so this loop's wall time follows RCU
latency (rcutree.jiffies_till_first_fqs, CONFIG_RCU_* options) more than CPU speed. A
kernel under lockdown refuses the function tracer; a VM guest's kernel (target qemu)
boots without lockdown, so there the seed's function,nop cycle runs as it did.
"""

from __future__ import annotations

from perfline.benchmarks.base import BenchmarkUnavailable, Param
from perfline.benchmarks.tracefs import TracefsCycle, refusal
from perfline.records.metric import Direction, Metric
from perfline.system.kernel_state import KernelStateError


def parse_tracers(text: str) -> list[str]:
    """'function, nop' -> ['function', 'nop']; repeats are kept, they are a valid cycle."""
    return [name.strip() for name in text.split(",") if name.strip()]


class FtraceSwitch(TracefsCycle):
    name = "ftrace-switch"
    summary = "wall time to switch ftrace tracers and toggle tracing_on, N times (RCU latency)"
    params = (
        Param("iterations", int, 100, "times the whole tracer cycle is run", minimum=1),
        Param(
            "tracers",
            str,
            "function,nop",
            "comma-separated tracers set in turn each iteration; 'blk,nop' works on kernels "
            "that refuse the function tracer (lockdown)",
        ),
    )
    metrics = (
        Metric(
            "ftrace-switch.seconds",
            "s",
            Direction.LOWER,
            "wall time of all iterations of set tracer, tracing_on 1, tracing_on 0",
        ),
    )

    listing = "available_tracers"
    _available: list[str]

    def prepare(self, listing: str) -> tuple[str, list[str]]:
        tracers = parse_tracers(str(self.values["tracers"]))
        if not tracers:
            raise BenchmarkUnavailable("ftrace-switch: tracers is empty (e.g. function,nop)")
        self._available = listing.split()
        missing = [t for t in tracers if t not in self._available]
        if missing:
            raise BenchmarkUnavailable(
                f"tracer {', '.join(missing)} not in available_tracers "
                f"({' '.join(self._available)}); set tracers to available ones, "
                f"e.g. `tracers: {_suggestion(self._available, missing)}`"
            )
        # current_tracer is restored even when a probe is refused: the kernel drops the
        # old tracer before it initialises the new one, so a refusal leaves nop behind.
        return "current_tracer", tracers

    def refused(self, value: str, exc: OSError | KernelStateError) -> str:
        return (
            f"the kernel refused the {value} tracer ({refusal(exc, self.kernel)}); choose tracers it "
            f"allows, e.g. `tracers: {_suggestion(self._available, [value])}`, or run the "
            "ftrace-events benchmark, which toggles a trace event instead (also RCU-bound)"
        )


def _suggestion(available: list[str], refused: list[str]) -> str:
    """A tracer cycle from what is left: another tracer and nop ('blk,nop' under lockdown)."""
    others = [t for t in available if t not in refused and t != "nop"]
    return f"{others[0]},nop" if others else "nop,nop"
