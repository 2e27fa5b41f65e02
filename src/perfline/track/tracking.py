"""One pass of a tracker: bring the tree up to date, resume a paused bisection, test
the pending commits oldest first, judge the history, narrow what it found.

`perfline track run --once` is one pass; without --once the CLI repeats passes.
Everything a pass decides is derived from the store and the repository, so a pass
killed at any moment is followed by one that continues where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from perfline import git
from perfline.bisect.driver import Progress
from perfline.builds.worktree import Builder
from perfline.records.status import BisectionStatus, RegressionStatus
from perfline.runner import RunContext
from perfline.runner.kexec_resume import THIS_MACHINE, BootSteps
from perfline.store import Regression, Store
from perfline.store.trackers import TrackerRecord
from perfline.track import kexec_tests, mailing
from perfline.track.budget import Budget
from perfline.track.judging import Found, daily_numbers, judge_history, open_regressions, tracker_series
from perfline.track.machines import measuring
from perfline.track.narrowing import narrow
from perfline.track.repository import local_repo, resolve_since, since_after_rewrite
from perfline.track.testing import Tested, builder_for, pending, test_commit
from perfline.track.tracker_file import TrackerSpec

if TYPE_CHECKING:
    from perfline.fleet.queue import FleetQueue

Notify = Callable[[str], None]


@dataclass
class Pass:
    """What one pass did."""

    head: str = ""
    tested: list[Tested] = field(default_factory=list)
    found: list[Found] = field(default_factory=list)
    narrowed: list[Regression] = field(default_factory=list)
    pending: int = 0  # commits still to test when the pass ended (budget, failures)


def run_pass(store: Store, spec: TrackerSpec, ctx: RunContext, progress: Progress,
             notify: Notify, pace_tolerance: float | None, now: datetime | None = None,
             fetched: bool = False, boot_steps: BootSteps = THIS_MACHINE) -> Pass:
    """One pass, on this machine or, for a tracker with `fleet:`, on its class's machines.
    `fetched`: a URL's clone was fetched a moment ago (by the check before the first pass).
    A kernel tracker with jobs of target kexec stops (MachineBooting) at each boot of a
    tested commit's kernel; `perfline resume` carries the pass on after it."""
    if spec.fleet_class is None:
        done = _pass(store, spec, ctx, None, progress, notify, pace_tolerance, now, fetched, boot_steps)
        kexec_tests.end_series(store, spec.name)
        return done
    from perfline.track import on_fleet  # procrastinate: only for a tracker on a fleet

    with on_fleet.open_queue(store) as queue:
        return _pass(store, spec, ctx, queue, progress, notify, pace_tolerance, now, fetched, boot_steps)


def _pass(store: Store, spec: TrackerSpec, ctx: RunContext, queue: FleetQueue | None, progress: Progress,
          notify: Notify, pace_tolerance: float | None, now: datetime | None, fetched: bool,
          boot_steps: BootSteps) -> Pass:
    now = now or datetime.now(UTC)
    repo, ref = local_repo(spec, notify, fetch=not fetched)
    head = git.resolve(repo, ref)
    tracker = store.ensure_tracker(spec.name, str(spec.path.resolve()), str(repo), spec.branch,
                                   resolve_since(spec, repo, head))
    since = _since_on_the_branch(store, spec, repo, tracker, head, notify)
    store.set_tracker_head(spec.name, head)
    history = [git.commit_info(repo, since), *git.first_parent(repo, since, head)]
    # Kept now, while the tree is at hand: the commits tested, and the ranges bisected
    # (first-parent too), are named by reports and pages after it is gone.
    store.remember_commits(history)
    builder = builder_for(spec, repo, notify)
    budget = Budget.today(store, spec.name, spec.runs_per_day, now)
    where = measuring(store, spec)
    done = Pass(head=head)

    on_branch = {c.sha for c in history}

    def narrow_all(which: Callable[[Regression], bool]) -> None:
        for regression in open_regressions(store, spec.name, spec.narrow):
            if which(regression) and budget.left() > 0 and not _left_the_branch(store, spec, regression, on_branch,
                                                                                 notify):
                done.narrowed.append(narrow(store, spec, regression, repo, builder, ctx, budget, progress, notify,
                                            pace_tolerance, queue, boot_steps))

    if spec.narrow:  # a regression's bisection in progress goes first
        narrow_all(lambda r: r.kind == "regression" and r.bisection_id is not None
                   and r.status == RegressionStatus.CONFIRMED
                   and store.bisection(r.bisection_id).status == BisectionStatus.RUNNING)
    todo = pending(spec, repo, history, ref, store, where, builder, now)
    if queue is not None:
        from perfline.track import on_fleet

        done.tested = on_fleet.test_commits(spec, todo, store, queue, where, budget, notify)
        where = measuring(store, spec)  # machines that joined the class meanwhile
    else:
        for commit in todo:
            if budget.left() == 0:
                notify(f"budget of {spec.runs_per_day} runs a day spent; {len(todo) - len(done.tested)} commits "
                       "wait for tomorrow")
                break
            notify(f"testing {commit.sha[:12]} {commit.subject}")
            done.tested.append(test_commit(spec, commit, store, builder, ctx, where, budget, notify, boot_steps))
    done.pending = sum(not t.complete for t in done.tested) + len(todo) - len(done.tested)
    # The tracker's series, read once for both: the records and the daily numbers.
    tracked = tracker_series(store, spec, repo, where, history)
    done.found = judge_history(store, spec, tracked, notify)
    store.set_daily_numbers(spec.name, daily_numbers(spec, repo, tracked, history))
    if spec.narrow:  # regressions, then improvements (`narrow: all`), each oldest first
        narrow_all(lambda r: r.status in (RegressionStatus.NEW, RegressionStatus.CONFIRMED))
    _release_trees(store, spec, builder, [t.commit.sha for t in done.tested])
    mailing.queue(store, spec, now, notify)
    mailing.flush(store, spec, notify)
    return done


def _since_on_the_branch(store: Store, spec: TrackerSpec, repo: Path, tracker: TrackerRecord, head: str,
                         notify: Notify) -> str:
    """The commit tracking starts at, on the branch's history as it is now. A branch
    rewritten since the last pass (force-pushed, rebased, rebuilt as linux-next is) is
    followed, and said so: its commits that are gone keep their runs in the store, but
    the tracker's series, numbers and records are of the history it has now."""
    since = tracker.since
    if not git.is_ancestor(repo, since, head):
        since = since_after_rewrite(spec, repo, head, tracker.since)
        store.set_tracker_since(spec.name, since)
        notify(f"{spec.branch} was rewritten below {tracker.since[:12]}, where tracking started: it starts again "
               f"at {since[:12]} ({'since: ' + spec.since if spec.since else 'where the two histories part'})")
    if tracker.head is not None and not git.is_ancestor(repo, tracker.head, head):
        notify(f"{spec.branch} was rewritten: the last pass's head {tracker.head[:12]} is not on it; the commits "
               "no longer on it keep their runs in the store, out of the tracker's series and records")
    return since


def _left_the_branch(store: Store, spec: TrackerSpec, regression: Regression, on_branch: set[str],
                     notify: Notify) -> bool:
    """Whether a record's tested commits left the branch when it was rewritten. It is not
    narrowed (its bisection would name a commit the branch no longer has; the new
    history's change, if it is there, has a record of its own) and says so once."""
    if all(sha is None or sha in on_branch for sha in (regression.good, regression.bad)):
        return False
    note = (f"not narrowed: {str(regression.good)[:12]}..{str(regression.bad)[:12]} is no longer on "
            f"{spec.branch} (rewritten)")
    if regression.note != note:
        store.set_regression_status(regression.id, regression.status, note)
        notify(f"{regression.kind} {regression.id}: {note}")
    return True


def _release_trees(store: Store, spec: TrackerSpec, builder: Builder, tested: list[str]) -> None:
    """Tested commits' worktrees are removed, but those at the ends of a regression still
    to narrow: its confirmation and bisection build them again otherwise."""
    keep = {sha for r in open_regressions(store, spec.name, spec.narrow) if r.status != RegressionStatus.BISECTED
            for sha in (r.good, r.bad) if sha}
    builder.release([sha for sha in tested if sha not in keep])


