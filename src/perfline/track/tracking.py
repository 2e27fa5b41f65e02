"""One pass of a tracker: bring the tree up to date, resume a paused bisection, test
the pending commits oldest first, judge the history, narrow what it found.

`perfline track run --once` is one pass; without --once the CLI repeats passes.
Everything a pass decides is derived from the store and the repository, so a pass
killed at any moment is followed by one that continues where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from perfline import git
from perfline.bisect.driver import Progress
from perfline.bisect.worktree import Builder, cache_dir
from perfline.records.status import BisectionStatus, RegressionStatus
from perfline.runner import RunContext
from perfline.store import Regression, Store
from perfline.track.budget import Budget
from perfline.track.judging import Found, daily_numbers, judge_history, open_regressions
from perfline.track.narrowing import narrow
from perfline.track.testing import Tested, builder_for, pending, test_commit
from perfline.track.tracker_file import TrackerSpec

Notify = Callable[[str], None]


@dataclass
class Pass:
    """What one pass did."""

    head: str = ""
    tested: list[Tested] = field(default_factory=list)
    found: list[Found] = field(default_factory=list)
    narrowed: list[Regression] = field(default_factory=list)
    pending: int = 0  # commits still to test when the pass ended (budget, failures)


def local_repo(spec: TrackerSpec, notify: Notify) -> tuple[Path, str]:
    """The tree to read and build, and the ref that names the followed branch there. A
    URL is cloned under perfline's cache on the first pass and fetched on every one."""
    if not spec.is_url:
        return Path(spec.repo), spec.branch
    clone = cache_dir().parent / "track" / spec.name / "repo"
    notify(f"fetching {spec.repo} into {clone}")
    git.clone_or_fetch(spec.repo, clone)
    return clone, spec.branch if spec.branch == "HEAD" else f"origin/{spec.branch}"


def local_repo_here(store: Store, spec: TrackerSpec) -> tuple[Path, str, list[git.Commit]]:
    """The tree, the branch's ref and the history from `since` to the head the last pass
    saw, without fetching (for status and graphs)."""
    tracker = store.tracker(spec.name)
    repo = Path(tracker.repo)
    ref = spec.branch if not spec.is_url or spec.branch == "HEAD" else f"origin/{spec.branch}"
    head = tracker.head or git.resolve(repo, ref)
    return repo, ref, [git.commit_info(repo, tracker.since), *git.first_parent(repo, tracker.since, head)]


def resolve_since(spec: TrackerSpec, repo: Path, head: str) -> str:
    """`since` as a full sha on the branch: a rev or tag, or an ISO date (the first
    first-parent commit on or after it); the head when the file gives none."""
    if spec.since is None:
        return head
    sha = git.resolve_or_none(repo, spec.since)
    if sha is None:
        try:
            day = date.fromisoformat(spec.since)
        except ValueError:
            raise spec.error("since", f"since: {spec.since!r} is neither a revision of {repo} nor a date "
                                      "(YYYY-MM-DD)") from None
        after = [c for c in git.first_parent(repo, None, head) if c.date and c.date.date() >= day]
        if not after:
            raise spec.error("since", f"since: no commit of {spec.branch} on or after {day}")
        return after[0].sha
    if not git.is_ancestor(repo, sha, head):
        raise spec.error("since", f"since: {spec.since} is not on the history of {spec.branch}")
    return sha


def check(spec: TrackerSpec, notify: Notify) -> None:
    """What the file names in git (branch, since, reference) exists, before anything runs."""
    repo, ref = local_repo(spec, notify)
    head = git.resolve_or_none(repo, ref)
    if head is None:
        raise spec.error("branch", f"branch: {repo} has no {ref}")
    resolve_since(spec, repo, head)
    if spec.reference is not None and git.resolve_or_none(repo, spec.reference) is None:
        raise spec.error("reference", f"reference: {repo} has no {spec.reference}")


def run_pass(store: Store, spec: TrackerSpec, ctx: RunContext, machine_id: str, progress: Progress,
             notify: Notify, pace_tolerance: float | None, now: datetime | None = None) -> Pass:
    now = now or datetime.now(UTC)
    repo, ref = local_repo(spec, notify)
    head = git.resolve(repo, ref)
    tracker = store.ensure_tracker(spec.name, str(spec.path.resolve()), str(repo), spec.branch,
                                   resolve_since(spec, repo, head))
    store.set_tracker_head(spec.name, head)
    history = [git.commit_info(repo, tracker.since), *git.first_parent(repo, tracker.since, head)]
    builder = builder_for(spec, repo, notify)
    budget = Budget.today(store, spec.name, spec.runs_per_day, now)
    done = Pass(head=head)

    def narrow_all(which: Callable[[Regression], bool]) -> None:
        for regression in sorted(open_regressions(store, spec.name), key=lambda r: r.id):
            if which(regression) and budget.left() > 0:
                done.narrowed.append(narrow(store, spec, regression, repo, builder, ctx, budget, progress, notify,
                                            pace_tolerance))

    if spec.narrow:  # a bisection in progress goes first
        narrow_all(lambda r: r.bisection_id is not None and r.status == RegressionStatus.CONFIRMED
                   and store.bisection(r.bisection_id).status == BisectionStatus.RUNNING)
    todo = pending(spec, repo, history, ref, store, machine_id, builder, now)
    for commit in todo:
        if budget.left() == 0:
            notify(f"budget of {spec.runs_per_day} runs a day spent; {len(todo) - len(done.tested)} commits wait "
                   "for tomorrow")
            break
        notify(f"testing {commit.sha[:12]} {commit.subject}")
        done.tested.append(test_commit(spec, commit, store, builder, ctx, machine_id, budget, notify))
    done.pending = sum(not t.complete for t in done.tested) + len(todo) - len(done.tested)
    done.found = judge_history(store, spec, repo, machine_id, notify)
    store.set_daily_numbers(spec.name, daily_numbers(store, spec, repo, machine_id, history))
    if spec.narrow:
        narrow_all(lambda r: r.status in (RegressionStatus.NEW, RegressionStatus.CONFIRMED))
    _release_trees(store, spec, builder, [t.commit.sha for t in done.tested])
    return done


def _release_trees(store: Store, spec: TrackerSpec, builder: Builder, tested: list[str]) -> None:
    """Tested commits' worktrees are removed, but those at the ends of a regression still
    to narrow: its confirmation and bisection build them again otherwise."""
    keep = {sha for r in open_regressions(store, spec.name) if r.status != RegressionStatus.BISECTED
            for sha in (r.good, r.bad) if sha}
    builder.release([sha for sha in tested if sha not in keep])


