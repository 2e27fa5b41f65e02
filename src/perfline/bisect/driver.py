"""Drives a stored bisection: replay what is recorded, then build, measure, record.

Every build result and sample is committed before the next decision, and the state
machine derives everything from them, so resuming after Ctrl-C or SIGKILL continues
exactly where the last committed sample left off, in the bisection or in its
confirmation A/B alike: both are the one loop over `Bisection.next_probe`, the loop that
bench/bisect_sim.py runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from perfline.bisect.bisection import Bisection, BisectResult
from perfline.bisect.confirm import Confirmation, Decision
from perfline.builds.worktree import Builder
from perfline.git import Commit
from perfline.records.metric import Direction
from perfline.store import Store
from perfline.store.bisections import BisectBuild, BisectionRecord, BisectSample
from perfline.system.speed import WINDOW_S, PaceGuard

# HISTORY: a stored run's sample at an endpoint, recorded when the bisection started.
# UNSTEADY: a sample the machine ran slow for (system/speed.py), kept for the record and
# taken again; no decision uses it.
# FAILED: the benchmark failed at the commit (value 0, the failed run's id): the commit is
# built again from a fresh checkout and measured once more; a second failure makes it
# untestable. No decision uses the sample; it is what makes a resumed bisection count
# the first failure.
BISECT, CONFIRM, HISTORY, UNSTEADY, FAILED = "bisect", "confirm", "history", "unsteady", "failed"
# Samples that are evidence of nothing but what happened.
NOT_EVIDENCE = (HISTORY, UNSTEADY, FAILED)
# How the build row of a commit the benchmark failed at begins (the rest: its output).
BENCHMARK_FAILED = "benchmark failed"
# How a kexec bisection's untestable commit whose kernel did not boot starts its build row.
BOOT_FAILED = "boot-failed"
# A slow spell of a shared VM lasts seconds: wait this long between retakes. The guard's
# patience says when a machine that stays slow stops the bisection (it can be resumed).
UNSTEADY_WAIT_S = 2.0


class BisectError(RuntimeError):
    """The bisection cannot go on. `fatal`: it never can (an endpoint does not build or
    cannot be measured); otherwise a resume may succeed (a machine that stayed slow)."""

    def __init__(self, message: str, *, fatal: bool) -> None:
        super().__init__(message)
        self.fatal = fatal


class MeasureFailed(RuntimeError):
    """The benchmark could not produce a value at this commit; `run_id`: its failed run.
    `untestable`: no second try can (its kernel did not boot): untestable at once."""

    def __init__(self, message: str, run_id: int | None = None, untestable: bool = False) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.untestable = untestable


class Measure(Protocol):
    def __call__(self, commit: Commit, tree_index: int) -> tuple[float, int | None]:
        """One value of the metric at the commit, and the perfline run id if any."""


@dataclass(frozen=True)
class Outcome:
    record: BisectionRecord
    result: BisectResult
    builds: int  # commits built for this bisection
    unsteady: int = 0  # samples taken again because the machine ran slow
    # Why each untestable commit is, by index: "did not build" or the benchmark failed.
    untestable: Mapping[int, str] = field(default_factory=dict)

    @property
    def confirmation(self) -> Confirmation | None:
        return self.result.confirmation

    def culprit(self) -> str | None:
        """The culprit, when the answer is one commit."""
        return self.record.spec.commits[self.result.culprit] if self.result.exact else None

    def culprits(self) -> list[str]:
        """The commits the change may be in: the culprit alone, or a range."""
        return [self.record.spec.commits[i] for i in self.result.suspects]

    def to_json(self) -> dict[str, Any]:
        spec, r, c = self.record.spec, self.result, self.confirmation
        change, ci = (c.change_pct, c.ci_pct) if c and c.decision is Decision.CONFIRMED else (r.change_pct, r.ci_pct)
        return {
            # One commit only when its parent was measured: else the range, never a guess.
            "culprit": spec.commits[r.culprit] if r.exact else None,
            "culprits": [spec.commits[i] for i in r.suspects],
            "first_bad_tested": spec.commits[r.culprit],
            "probability": r.probability,
            "change_pct": change,
            "ci_pct": list(ci),
            "runs": r.runs,
            "builds": self.builds,
            "unsteady_runs": self.unsteady,
            "status": r.status.value,
            "kind": r.kind.value,
            "suspects": [spec.commits[i] for i in r.suspects],
            "untestable": {spec.commits[i]: why for i, why in sorted(self.untestable.items())},
            "parent": spec.commits[r.parent],
            "kernel": None if spec.kernel_config is None else {
                "config": spec.kernel_config, "config_source": spec.kernel_config_source,
            },
            "confirmation": None if c is None else {
                "decision": c.decision.value, "change_pct": c.change_pct,
                "ci_pct": list(c.ci_pct), "p_value": c.p_value, "samples": c.samples,
            },
        }


Progress = Callable[[str, int, float], None]  # (event, runs so far, top posterior)


def _unusable(guard: PaceGuard, elapsed_s: float, slowdowns: list[float], sha: str, bisection_id: int) -> str:
    """The one line that stops a bisection on a machine that stayed slow, with the figures."""
    return (f"the machine was unusable for {elapsed_s / 60:.1f} min: {len(slowdowns)} samples of {sha} in a row "
            f"ran {min(slowdowns):.0%} to {max(slowdowns):.0%} slower than its pace of the last "
            f"{WINDOW_S / 60:g} min ({guard.reference() / 1000:.0f} µs, {guard.allowed():.0%} allowed); "
            f"`perfline bisect resume {bisection_id}` continues when it is steady again")


def replay(store: Store, record: BisectionRecord) -> Bisection:
    """The state machine rebuilt from the store: its untestable commits and samples."""
    samples = store.bisect_samples(record.id)
    bisection = _before_any_run(store, record, samples)
    # Confirmation samples are samples of the bisection too, in the order they were taken.
    for sample in samples:
        if sample.phase not in NOT_EVIDENCE:
            bisection.observe(sample.commit_index, sample.value)
    return bisection


@dataclass(frozen=True)
class Step:
    """One stored sample and what the bisection concluded after it."""

    sample: BisectSample
    culprit: int | None  # the most probable first bad commit then; None for history
    probability: float
    # P(first bad commit = k) over the range's commits after this sample; empty for
    # history and unsteady samples (the dashboard draws it per probe).
    posterior: tuple[float, ...] = ()


def trace(store: Store, record: BisectionRecord) -> list[Step]:
    """Every sample in the order taken, each with the most probable culprit after it:
    the bisection replayed one sample at a time, as `bisect log` shows it."""
    samples = store.bisect_samples(record.id)
    bisection = _before_any_run(store, record, samples)
    steps = [Step(s, None, float("nan")) for s in samples if s.phase == HISTORY]
    for sample in samples:
        if sample.phase in (UNSTEADY, FAILED):
            steps.append(Step(sample, None, float("nan")))
        elif sample.phase != HISTORY:
            bisection.observe(sample.commit_index, sample.value)
            result = bisection.result()
            steps.append(Step(sample, result.culprit, result.probability, tuple(bisection.posterior().tolist())))
    return steps


def _before_any_run(store: Store, record: BisectionRecord, samples: list[BisectSample]) -> Bisection:
    """The bisection with its untestable commits and its history, before its first run."""
    spec = record.spec
    last = len(spec.commits) - 1
    untestable = [b.commit_index for b in store.bisect_builds(record.id) if not b.ok and b.commit_index not in (0, last)]
    return Bisection(len(spec.commits), Direction(spec.direction), max_runs=spec.max_runs, untestable=untestable,
                     prior_obs=[(s.commit_index, s.value) for s in samples if s.phase == HISTORY])


def drive(
    store: Store,
    bisection_id: int,
    builder: Builder,
    commits: list[Commit],
    measure: Measure,
    progress: Progress = lambda event, runs, top: None,
    guard: PaceGuard | None = None,
    allowed: Callable[[], bool] | None = None,
) -> Outcome:
    """Run the bisection to its end. With `guard`, a sample the machine ran slow for is
    stored as unsteady and taken again. `allowed()` is asked before every probe: False
    stops the bisection resumably (a tracker's budget for the day is spent)."""
    record = store.bisection(bisection_id)
    bisection = replay(store, record)
    built = {b.commit_index: b.ok for b in store.bisect_builds(record.id)}

    def ready(index: int) -> bool:
        """Build the commit (its recorded build if it has one); False when it does not
        build. Asked before every sample: a tree removed since (a rebuild after a failed
        run, a kill in between) is built again before anything runs in it."""
        if built.get(index) is False:
            return False
        result = builder.build(commits[index].sha)
        if index not in built:
            store.add_bisect_build(record.id, BisectBuild(index, result.ok, result.seconds, result.log_tail))
            built[index] = result.ok
            if not result.ok and index in (0, len(commits) - 1):
                which = "good" if index == 0 else "bad"
                raise BisectError(f"the {which} commit {commits[index].sha[:12]} does not build:\n{result.log_tail}",
                                  fatal=True)
        elif not result.ok:  # built before, but not from the fresh checkout of a retry
            raise MeasureFailed(f"{commits[index].sha[:12]} no longer builds:\n{result.log_tail}")
        return built[index]

    def failed(index: int, exc: MeasureFailed) -> bool:
        """A failed measurement: True to measure the commit again on a fresh build, False
        once it failed on two builds (it is then untestable, both failures said)."""
        if exc.untestable:
            store.add_bisect_build(record.id, BisectBuild(index, False, 0.0, str(exc)))
            return False
        earlier = [s for s in store.bisect_samples(record.id) if s.phase == FAILED and s.commit_index == index]
        if not earlier:
            builder.rebuild(commits[index].sha)
            store.add_bisect_sample(record.id, BisectSample(index, FAILED, 0.0, exc.run_id))
            progress(f"{commits[index].sha[:12]} failed ({exc}); built again from a fresh checkout",
                     bisection.runs, float(bisection.posterior().max()))
            return True
        endpoint = index in (0, len(commits) - 1)
        if not endpoint and not bisection.samples_at(index):
            first = earlier[0].run_id
            why = store.get_run(first).error if first is not None else None
            log = (f"{BENCHMARK_FAILED} on two builds: first (run {first}): {why or '?'}\n"
                   f"then, on a fresh build (run {exc.run_id}): {exc}")
            store.add_bisect_build(record.id, BisectBuild(index, False, 0.0, log))
        return False

    def sample(index: int, phase: str) -> float:
        sha = commits[index].sha[:12]
        started = guard.clock() if guard else 0.0
        slowdowns: list[float] = []
        while True:
            before = guard.slowdown() if guard else 0.0
            value, run_id = measure(commits[index], index)
            after = guard.slowdown() if guard else 0.0
            if not (value > 0 and math.isfinite(value)):
                raise BisectError(f"commit {sha} gave {value!r}; the metric must be positive", fatal=True)
            slower = max(before, after)
            if guard is None or guard.steady(slower):
                store.add_bisect_sample(record.id, BisectSample(index, phase, value, run_id))
                return value
            store.add_bisect_sample(record.id, BisectSample(index, UNSTEADY, value, run_id))
            slowdowns.append(slower)
            progress(f"{sha} = {value:.6g} with the machine {slower:.0%} slower than its recent pace: taken again",
                     bisection.runs, float(bisection.posterior().max()))
            if guard.clock() - started >= guard.patience_s:
                raise BisectError(_unusable(guard, guard.clock() - started, slowdowns, sha, record.id), fatal=False)
            time.sleep(UNSTEADY_WAIT_S)

    while (probe := bisection.next_probe()) is not None:
        if allowed is not None and not allowed():
            raise BisectError(f"bisection {record.id} paused after {bisection.runs} runs: the budget is spent; "
                              "it resumes where it stopped", fatal=False)
        phase = CONFIRM if bisection.confirming else BISECT
        try:
            if not ready(probe):
                bisection.mark_untestable(probe)
                progress(f"{commits[probe].sha[:12]} does not build: untestable", bisection.runs, 0.0)
                continue
            value = sample(probe, phase)
        except MeasureFailed as exc:
            if failed(probe, exc):
                continue  # measured again on a fresh build
            endpoint = probe in (0, len(commits) - 1)
            if bisection.samples_at(probe) or endpoint:
                raise BisectError(f"measuring {commits[probe].sha[:12]} failed on two builds: {exc}",
                                  fatal=endpoint and not bisection.samples_at(probe)) from exc
            bisection.mark_untestable(probe)
            progress(f"{commits[probe].sha[:12]} failed on two builds: untestable", bisection.runs, 0.0)
            continue
        bisection.observe(probe, value)
        event = f"{'A/B: ' if phase == CONFIRM else ''}{commits[probe].sha[:12]} = {value:.6g}"
        progress(event, bisection.runs, float(bisection.posterior().max()))

    result = bisection.result()
    # Builds: commits that needed one (a worktree already built by an earlier bisection
    # of the same range counts, though it cost nothing this time).
    unsteady_total = sum(s.phase == UNSTEADY for s in store.bisect_samples(record.id))
    untestable = {b.commit_index: untestable_reason(b) for b in store.bisect_builds(record.id) if not b.ok}
    outcome = Outcome(record, result, len(built), unsteady_total, untestable)
    store.finish_bisection(record.id, result.status.value, outcome.to_json())
    return replace(outcome, record=store.bisection(record.id))


def untestable_reason(build: BisectBuild) -> str:
    """Why a commit is untestable, in a few words, from its failed build row."""
    if build.log_tail.startswith(BOOT_FAILED):
        return "its kernel did not boot"
    return "the benchmark failed on two builds" if build.log_tail.startswith(BENCHMARK_FAILED) else "did not build"
