"""A record's sequential confirmation as one test over every attempt at it.

A tracker confirms a record with an interleaved A/B of its two commits, looked at on a
group-sequential plan (stats.sequential) whose looks together err at alpha. An attempt
can end before the plan does: a repetition fails (a benchmark that fails once in 50
runs), the pass is killed, the day's budget runs out. Starting the plan again from its
first look on the next pass gave a record that is no change a fresh chance at alpha each
time: 1.75% of A/A records confirmed over up to 4 attempts where one attempt confirms 0.8%
(bench/confirm_attempts.py). So each attempt's runs carry the record and the plan from
their start, and the next attempt continues the same test: the earlier attempts'
complete pairs come first, its looks are at the pairs counted over all attempts, and
only a look judges. Pairs taken days apart stay pairs: each was measured back to back, so
a machine that moved between attempts moves both sides of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfline.analysis.comparison import DEFAULT_FLOOR_PCT, CaseComparison, Side, compare_sides
from perfline.analysis.regressions import CONFIRMS, CannotConfirm, Reproduction, ReRun, judge_rerun
from perfline.records.metric import Metric
from perfline.records.status import RunStatus
from perfline.stats.sequential import SequentialPlan
from perfline.store import Regression, RunDetail, Store, sample_columns

if TYPE_CHECKING:
    from perfline.runner import RunContext

ATTEMPT = "attempt"  # settings: which attempt at it, 1, 2, ...
PLAN_PAIRS = "plan_pairs"  # settings: the plan's most pairs, fixed by the first attempt


@dataclass(frozen=True)
class Attempt:
    """One attempt's two runs and how many pairs both completed."""

    before: RunDetail
    after: RunDetail
    pairs: int


@dataclass(frozen=True)
class Attempts:
    """The earlier attempts at a record's confirmation of the same two sides, in order."""

    attempts: tuple[Attempt, ...]
    plan_pairs: int | None  # the first attempt's plan; None before any attempt
    last: int  # the highest attempt number seen, with or without pairs

    @property
    def pairs(self) -> int:
        return sum(attempt.pairs for attempt in self.attempts)

    def settings(self, regression_id: int, plan_pairs: int) -> dict[str, int]:
        """What the next attempt's runs carry."""
        return {CONFIRMS: regression_id, ATTEMPT: self.last + 1, PLAN_PAIRS: self.plan_pairs or plan_pairs}

    def values(self, metric: str) -> tuple[list[float], list[float]]:
        """The earlier pairs' values of `metric`, before and after, pair by pair."""
        sides: tuple[list[float], list[float]] = ([], [])
        for attempt in self.attempts:
            for values, run in zip(sides, (attempt.before, attempt.after), strict=True):
                values.extend(_first(run, metric, attempt.pairs))
        return sides

    def metric(self, name: str) -> Metric | None:
        return next((s.metric for a in self.attempts for s in a.before.samples if s.metric.name == name), None)

    def with_attempt(self, attempt: Attempt) -> Attempts:
        return Attempts((*self.attempts, attempt), self.plan_pairs, self.last + 1)

    def runs(self) -> str:
        """The attempts' runs, for a note: "runs 4, 5" or "runs 4, 5; 9, 10"."""
        return "runs " + "; ".join(f"{a.before.info.id}, {a.after.info.id}" for a in self.attempts)

    def sides(self) -> list[Side]:
        """Both sides of the comparison over every attempt, pair after pair in order, so
        that the i-th values of the two sides are the i-th pair."""
        out = []
        for name, side in (("before", 0), ("after", 1)):
            runs = [(attempt.before, attempt.after)[side] for attempt in self.attempts]
            samples = [(run.info.id, s.repetition, s.metric.name, s.source, s.value)
                       for run, attempt in zip(runs, self.attempts, strict=True) for s in run.samples
                       if s.repetition < attempt.pairs]
            metrics = {s.metric.name: s.metric for run in runs for s in run.samples}
            ids = [run.info.id for run in runs]
            label = f"run {ids[0]}" if len(ids) == 1 else f"runs {', '.join(map(str, ids))}"
            out.append(Side(f"{name} ({label})", runs, sample_columns(samples, metrics, ids)))
        return out


def confirm(store: Store, regression: Regression, found: Reproduction, ctx: RunContext, pairs: int,
            plan: SequentialPlan, ctx_after: RunContext | None = None,
            say: Callable[[str], None] = lambda _: None) -> tuple[Regression, CaseComparison]:
    """Go on with the record's confirmation: at most `pairs` more pairs, interleaved, each
    side in its own context (a tracker's two commits, each in its built tree), stopped
    at the first look of `plan` that decides, counted over every attempt. Decided:
    `confirmed` or `false-alarm`. Undecided at the plan's last look: `false-alarm` with a
    note that says "not confirmed" (a change the A/B cannot show in its pairs is not
    tried every day at full cost). Anything else, CannotConfirm: the record stays new and
    the next attempt goes on from here. The plan is the first attempt's."""
    # Not above: the runner is slow to import.
    from perfline.runner import execute_interleaved

    ctx_after = ctx_after or ctx
    done = earlier(store, regression.id, (found.before.key, ctx.kernel_commit),
                   (found.after.key, ctx_after.kernel_commit), regression.metric)
    if done.plan_pairs is not None:
        plan = SequentialPlan.up_to(done.plan_pairs, plan.alpha, plan.confidence)
    last_look = plan.looks[-1]
    if done.attempts:
        say(f"regression {regression.id}: its confirmation goes on from {done.pairs} of its {last_look} pairs "
            f"({len(done.attempts)} attempt(s) before: {done.runs()})")

    # The earlier pairs do not change while this attempt runs: read once, not per pair.
    earlier_values = {name: done.values(name) for name in {s.metric.name for a in done.attempts
                                                             for s in a.before.samples}}

    def decided(metric: Metric, base: list[float], other: list[float]) -> bool:
        before, after = earlier_values.get(metric.name, ([], []))
        return plan.done(before + base, after + other, metric, DEFAULT_FLOOR_PCT)

    # The earlier attempts may already end the test: all of its pairs, or a look that
    # decides (an attempt killed after its deciding look, before its verdict).
    known = done.metric(regression.metric)
    if known is None or not decided(known, [], []):
        outcomes = execute_interleaved(found.before, found.after, min(pairs, last_look - done.pairs), ctx,
                                       decided, ctx_after, settings=done.settings(regression.id, last_look))
        new = min((o.repetitions for o in outcomes), default=0)
        cut_short = [o for o in outcomes if o.status != RunStatus.COMPLETED]
        if len(outcomes) < 2 or (cut_short and new == 0):
            raise CannotConfirm("the re-runs failed: " + "; ".join(f"run {o.run_id}: {o.error}" for o in outcomes))
        done = done.with_attempt(Attempt(store.get_run(outcomes[0].run_id), store.get_run(outcomes[1].run_id), new))
        # A look judges, nothing else: judging the pairs an attempt stopped at would be a
        # look the plan's alpha does not pay for.
        if cut_short:
            raise CannotConfirm(
                f"the re-run stopped after {new} pairs, {done.pairs} of the test's {last_look} (run "
                f"{cut_short[0].run_id}: {cut_short[0].error}); the next pass goes on with it")
        # A count has a look of its own at 2 pairs (stats.sequential.looks_of).
        known = done.metric(regression.metric)
        if done.pairs < last_look and (known is None or done.pairs not in plan.looks_of(known)):
            raise CannotConfirm(f"the day's budget allowed {new} pairs, {done.pairs} of the test's {last_look}; "
                                "the next pass goes on with it")
    total = done.pairs
    comparison = compare_sides(done.sides(), store, paired=True, alpha=plan.alpha_at(total),
                               confidence=plan.confidence_at(total))
    over = f" over {len(done.attempts)} attempts" if len(done.attempts) > 1 else ""
    judged = judge_rerun(store, regression, comparison, ReRun(
        f"re-run interleaved ({done.runs()})", f"the re-run ({done.runs()})", f"{total} pairs{over}",
        "; the next pass goes on with it"), total >= last_look, found.describe())
    return judged, comparison


def earlier(store: Store, regression_id: int, before: tuple[str, str | None], after: tuple[str, str | None],
            metric: str) -> Attempts:
    """The attempts at confirming `regression_id` whose sides were these (case key,
    commit) pairs: a record moved to other commits starts a test of its own."""
    runs = [store.get_run(run_id) for run_id in store.find_runs(setting=(CONFIRMS, regression_id),
                                                               with_samples=False)]
    numbered: dict[int, dict[str, RunDetail]] = {}
    for run in runs:
        if (attempt := run.settings.get(ATTEMPT)) is not None:
            numbered.setdefault(int(attempt), {})[str(run.settings.get("interleaved"))] = run
    found, plan_pairs = [], None
    for number in sorted(numbered):
        sides = numbered[number]
        if "A" not in sides or "B" not in sides:
            continue  # killed before its second run started: no pair
        a, b = sides["A"], sides["B"]
        if ((a.info.case_key, a.info.kernel_commit), (b.info.case_key, b.info.kernel_commit)) != (before, after):
            continue
        plan_pairs = plan_pairs or int(a.settings[PLAN_PAIRS])
        if pairs := min(_repetitions(a, metric), _repetitions(b, metric)):
            found.append(Attempt(a, b, pairs))
    return Attempts(tuple(found), plan_pairs, max(numbered, default=0))


def _repetitions(run: RunDetail, metric: str) -> int:
    """Repetitions are stored in order, each before the next starts: the count is the
    number of the first one missing."""
    return len({s.repetition for s in run.samples if s.metric.name == metric})


def _first(run: RunDetail, metric: str, pairs: int) -> list[float]:
    return [s.value for s in sorted(run.samples, key=lambda s: s.repetition)
            if s.metric.name == metric and s.repetition < pairs]
