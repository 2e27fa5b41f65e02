"""A machine's health job, as LAVA runs one: when its worker starts and every N jobs.

The job is a real run through the runner and the store (label `fleet-health`): the
`command` benchmark timing the `pace` helper, a fixed CPU loop in its own CPU time. A
run that fails (the store, the benchmark tools, the machine) marks the machine `bad`;
so does a pace that is far off the rest of its class, since its numbers would then not
compare with theirs. Slow spells only ever slow a machine down, so the machine's pace
is the fastest of the run's repetitions (as in system.speed); and since a slow spell can
last seconds, a pace off its class is measured again after a pause before the machine
is benched (a machine that is really throttled stays off on every look).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from perfline.records.job import Case
from perfline.records.status import RunStatus
from perfline.runner import RunContext, execute
from perfline.store import Store
from perfline.store.fleet import MachineFacts
from perfline.system.env_settings import env_number
from perfline.system.native import native_binary

LABEL = "fleet-health"
# How far a machine's pace may be from its class's median before it is `bad`: the pace
# loop's own spread is ~1%; a machine 25% off runs at another clock or is throttled.
SPEED_TOLERANCE_ENV = "PERFLINE_FLEET_SPEED_TOLERANCE"
# Looks at the pace before a machine is benched for it, and the pause between them: longer
# than the slow spells seen on shared hosts (0.1-3 s), short next to a job.
PACE_LOOKS = 3
PACE_PAUSE_S = 5.0


@dataclass(frozen=True)
class Health:
    pace_ns: int | None
    problem: str | None
    run_id: int | None


def health_case() -> Case:
    return Case(
        job="fleet-health", benchmark="command",
        params={"cmd": str(native_binary("pace")), "metric": "pace", "unit": "ns", "direction": "lower",
                "timing": False, "timeout": 60.0},
        tunables={}, repeat=5, warmup=1, monitors=(), target="local",
    )


def check(store: Store, facts: MachineFacts, ctx: RunContext) -> Health:
    """Run the health job and judge it; the verdict is stored on the machine."""
    pace: int | None = None
    for look in range(PACE_LOOKS):
        if look:
            time.sleep(PACE_PAUSE_S)
        try:
            outcome = execute(health_case(), ctx)
        except FileNotFoundError as exc:  # the pace helper is not built
            return _judged(store, facts, Health(None, f"health job could not start: {exc}", None))
        if outcome.status != RunStatus.COMPLETED:
            return _judged(store, facts, Health(None, f"health run {outcome.run_id} {outcome.status}: "
                                                      f"{outcome.error}", outcome.run_id))
        values = [s.value for s in store.get_run(outcome.run_id).samples if s.source == "benchmark"]
        pace = int(min(values)) if pace is None else min(pace, int(min(values)))
        problem = off_class(pace, store.class_paces(facts.machine_class, facts.name))
        if problem is None:
            break
    assert pace is not None
    return _judged(store, facts, Health(pace, problem, outcome.run_id))


def off_class(pace_ns: int, class_paces: list[int]) -> str | None:
    """Why this pace does not belong with the class's others, or None if it does."""
    if not class_paces:
        return None
    median = statistics.median(class_paces)
    off = pace_ns / median - 1.0
    tolerance = env_number(SPEED_TOLERANCE_ENV, 0.25)
    if abs(off) <= tolerance:
        return None
    return (f"pace {pace_ns / 1000:.0f} µs is {off:+.0%} off its class's {median / 1000:.0f} µs "
            f"(tolerance ±{tolerance:.0%}, ${SPEED_TOLERANCE_ENV})")


def _judged(store: Store, facts: MachineFacts, health: Health) -> Health:
    store.record_health(facts.name, health.pace_ns, health.problem)
    return health
