"""Stored runs at a bisection's endpoints: the levels known before the first probe.

A regression is usually bisected because stored runs showed it (`perfline detect`
between two commits, or `compare` of two labelled kernels), so both endpoints often
have several samples already. They pin the good and bad levels and the noise that
every probe is judged by, which otherwise costs the first runs of the bisection (see
docs/bisect.md: not knowing the levels costs about 11 runs at 2% noise).

Only runs that measured the same thing count: the job's benchmark and case (parameters
and tunables), run on this machine's own kernel (a VM's runs are another kernel's), on
this machine, completed, not a side of an interleaved A/B, with the commit resolved in
the bisected repository. Each repetition is one sample, as each probe is one repetition.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfline import git
from perfline.records.job import Case
from perfline.records.status import RunStatus
from perfline.store import Store


@dataclass(frozen=True)
class HistorySample:
    endpoint: int  # 0: the good commit; 1: the bad commit
    value: float
    run_id: int


def endpoint_history(
    store: Store, case: Case, metric: str, repo: Path, good: str, bad: str, machine_id: str
) -> list[HistorySample]:
    """Every stored sample of `metric` for `case` on this machine at `good` or `bad`
    (full shas), oldest run first."""
    if case.target != "local":
        return []
    found = store.metric_values(metric=metric, benchmark=case.benchmark, case_key=case.key,
                                machine_id=machine_id)
    resolved: dict[str, str | None] = {}
    samples = []
    for item in found:
        named = item.run.kernel_commit
        # An A/B side ran beside another configuration, with its tunables switched
        # around each step: not a plain measurement of the case.
        if item.run.status != RunStatus.COMPLETED or item.run.target != "local" or item.interleaved or not named:
            continue
        if named not in resolved:
            resolved[named] = git.resolve_or_none(repo, named)
        sha = resolved[named]
        if sha in (good, bad):
            samples += [HistorySample(int(sha == bad), v, item.run.id) for v in item.values]
    return samples

