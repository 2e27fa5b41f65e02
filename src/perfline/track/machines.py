"""Where a tracker measures: this machine, or the machines of one fleet class.

A commit counts as tested when it has a completed run of every case on one of these
machines, and the tracker's series are its runs there: one series per machine, or, for
a fleet class, the class's machines as one (their numbers compare: same CPU model and
count, and each machine's health job keeps it within its class's speed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from perfline.store import RunValues, Store
from perfline.targets import local
from perfline.track.tracker_file import TrackerSpec


@dataclass(frozen=True)
class Measuring:
    machine_ids: frozenset[str]
    machine_class: str | None = None  # a fleet class

    def series_values(self, values: list[RunValues]) -> list[RunValues]:
        """The values of these machines; a class's as if of one machine, `class:NAME`."""
        mine = [v for v in values if v.machine_id in self.machine_ids]
        if self.machine_class is None:
            return mine
        return [replace(v, machine_id=f"class:{self.machine_class}") for v in mine]


def measuring(store: Store, spec: TrackerSpec) -> Measuring:
    if spec.fleet_class is None:
        return Measuring(frozenset({local.machine_id()}))
    return Measuring(frozenset(store.class_machine_ids(spec.fleet_class)), spec.fleet_class)

