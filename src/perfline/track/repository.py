"""A tracker's tree: the repository to read and build (a URL cloned and fetched), the
followed branch's ref, and `since` resolved to a commit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

from perfline import git
from perfline.store import Store
from perfline.targets.kernels import cache_dir
from perfline.track.tracker_file import TrackerSpec

Notify = Callable[[str], None]


def local_repo(spec: TrackerSpec, notify: Notify, fetch: bool = True) -> tuple[Path, str]:
    """The tree to read and build, and the ref that names the followed branch there. A
    URL is cloned under perfline's cache on the first pass and fetched on every one
    (`fetch=False`: it was, a moment ago)."""
    if not spec.is_url:
        return Path(spec.repo), spec.branch
    clone = cache_dir() / "track" / spec.name / "repo"
    if fetch or not (clone / ".git").exists():
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


def since_after_rewrite(spec: TrackerSpec, repo: Path, head: str, kept: str) -> str:
    """Where tracking starts once the branch was rewritten below `kept`, the commit it
    started at (linux-next is rebuilt every day; a topic branch is rebased): the file's
    `since` resolved again on the new history; without one, the newest commit the old and
    new histories share, so that tracking goes on from where they part; the head when
    they share none."""
    if spec.since is not None:
        return resolve_since(spec, repo, head)
    return git.merge_base(repo, kept, head) or head


def check(spec: TrackerSpec, notify: Notify) -> None:
    """What the file names in git (branch, since, reference) exists, and its jobs can be
    measured where the tracker measures them (a kernel tracker: booted in a VM, or by a
    fleet machine with kexec), before anything runs."""
    from perfline.track.testing import cases  # the job machinery: only for a tracker that runs

    cases(spec)
    repo, ref = local_repo(spec, notify)
    head = git.resolve_or_none(repo, ref)
    if head is None:
        raise spec.error("branch", f"branch: {repo} has no {ref}")
    resolve_since(spec, repo, head)
    if spec.reference is not None and git.resolve_or_none(repo, spec.reference) is None:
        raise spec.error("reference", f"reference: {repo} has no {spec.reference}")
