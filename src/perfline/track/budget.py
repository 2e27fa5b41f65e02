"""The tracker's daily budget of benchmark runs, counted from the store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from perfline.analysis.regressions import rerun_label, why_label
from perfline.store import Store


@dataclass
class Budget:
    """Runs the tracker may still start today: its own label's and its bisections'."""

    store: Store
    labels: list[str]
    limit: int
    since: datetime

    def left(self) -> int:
        used, _ = self.store.runs_started(self.labels, self.since)
        return max(0, self.limit - used)

    @classmethod
    def today(cls, store: Store, name: str, limit: int, now: datetime) -> Budget:
        """Since local midnight, the tracker's runs, its bisections' probes, its
        confirmations over kexec boots and its culprits' profiled A/Bs; counted
        in the store, so a second `track run` the same day sees what the first spent."""
        midnight = now.astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
        records = store.regressions(tracker=name)
        labels = [name, *(f"bisect-{r.bisection_id}" for r in records if r.bisection_id),
                  *(rerun_label(r.id) for r in records), *(why_label(r.id) for r in records if r.culprit)]
        return cls(store, labels, limit, midnight)
