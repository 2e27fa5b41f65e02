"""What a fleet job can ask of a machine, by its `kind`:

- `case` (the default): run one case; with a `tree` (repo, commit, build), in that
  commit's built worktree, the run's kernel commit set to it (a tracker's tested commit);
- `confirm`: a tracker's regression confirmed on this machine by interleaved runs of its
  two commits' trees, with the sequential plan (analysis.regressions.confirm);
- `bisect`: a tracker's bisection carried on here, every probe on this one machine, at
  most `allowed_runs` probes (it stays resumable, as a local bisection does).

A `case` job is done once through its run (store.fleet); a `confirm` or `bisect` job
that runs again after its machine fell silent continues from what the store holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from perfline.fleet.trees import TreeFailed, built_tree, local_repo
from perfline.records.job import case_from_json
from perfline.records.status import RunStatus
from perfline.runner import RunContext, execute
from perfline.store import Store

Say = Callable[[str], None]


@dataclass(frozen=True)
class JobResult:
    status: str  # a RunStatus: completed, failed, interrupted
    run_id: int | None = None
    error: str | None = None


def run_job(store: Store, ctx: RunContext, args: dict[str, Any], say: Say) -> JobResult:
    kind = args.get("kind", "case")
    try:
        if kind == "case":
            return _case(ctx, args)
        if kind == "confirm":
            return _confirm(store, ctx, args, say)
        if kind == "bisect":
            return _bisect(store, args, say)
    except TreeFailed as exc:
        return JobResult(RunStatus.FAILED, None, str(exc))
    return JobResult(RunStatus.FAILED, None, f"unknown job kind {kind!r} (a newer perfline queued it?)")


def _in_tree(ctx: RunContext, tree: dict[str, Any], commit: str) -> RunContext:
    return replace(ctx, tree=built_tree(tree["repo"], tree["build"], commit), kernel_commit=commit)


def _case(ctx: RunContext, args: dict[str, Any]) -> JobResult:
    here = replace(ctx, label=args.get("label"), kernel_commit=args.get("kernel_commit"))
    if (tree := args.get("tree")) is not None:
        here = _in_tree(here, tree, tree["commit"])
    outcome = execute(case_from_json(args["case"]), here)
    return JobResult(outcome.status, outcome.run_id, outcome.error)


def _confirm(store: Store, ctx: RunContext, args: dict[str, Any], say: Say) -> JobResult:
    # scipy and the analysis: only on machines that confirm.
    from perfline.analysis.regressions import CannotConfirm, Reproduction
    from perfline.analysis.sequential_confirmation import confirm
    from perfline.stats.sequential import SequentialPlan

    regression = store.get_regression(int(args["regression"]))
    case = case_from_json(args["case"])
    here = replace(ctx, label=args.get("label"))
    before, after = (_in_tree(here, args["tree"], args[side]) for side in ("good", "bad"))
    pairs = int(args["pairs"])
    try:
        # The whole test's plan; a job from a tracker before plans were sent has its pairs.
        plan = SequentialPlan.up_to(int(args.get("plan_pairs", pairs)), 0.01)
        regression, _ = confirm(store, regression, Reproduction(case, case, ({}, {})), before, pairs, plan, after,
                                say)
    except CannotConfirm as exc:
        return JobResult(RunStatus.FAILED, None, f"cannot confirm: {exc}")
    say(f"regression {regression.id}: {regression.status} ({regression.note})")
    return JobResult(RunStatus.COMPLETED)


def _bisect(store: Store, args: dict[str, Any], say: Say) -> JobResult:
    from perfline.bisect import session
    from perfline.system.speed import TOLERANCE

    record = store.bisection(int(args["bisection"]))
    # The tracker's repository as this machine reaches it (a URL: its own clone).
    record = replace(record, spec=replace(record.spec, repo=str(local_repo(args.get("repo") or record.spec.repo))))
    allowed = int(args.get("allowed_runs", 0)) or None
    probes = 0

    def more() -> bool:
        nonlocal probes
        probes += 1
        return allowed is None or probes <= allowed

    try:
        outcome = session.run(store, record, lambda event, runs, top: None, say,
                              pace_tolerance=args.get("pace_tolerance", TOLERANCE), allowed=more)
    except session.BisectionFailed as exc:
        return JobResult(RunStatus.FAILED, None, str(exc))
    say(f"bisection {record.id}: {outcome.record.status}")
    return JobResult(RunStatus.COMPLETED)
