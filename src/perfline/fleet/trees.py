"""The built tree a fleet job runs in: a tracked commit's worktree, built on the machine.

A job that names a tree (repository, commit, build command) runs its case in that
commit's worktree, as a tracker does on its own machine. The repository is a path every
machine reaches (the same host, NFS) or a URL, cloned once under the machine's cache and
fetched when a commit is missing. Workers of one host share the cache, so a commit is
built under a lock, once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from perfline import git
from perfline.builds.worktree import Builder
from perfline.system.files import locked
from perfline.targets.kernels import cache_dir


class TreeFailed(RuntimeError):
    pass


def local_repo(repo: str, commit: str | None = None) -> Path:
    """The repository on this machine: the path itself, or a clone of the URL that has `commit`."""
    if not git.is_url(repo):
        return Path(repo)
    clone = cache_dir() / "fleet" / "repos" / hashlib.sha256(repo.encode()).hexdigest()[:16]
    with locked(clone.with_suffix(".lock")):
        if not (clone / ".git").exists() or (commit is not None and git.resolve_or_none(clone, commit) is None):
            git.clone_or_fetch(repo, clone)
    return clone


def built_tree(repo: str, build: str, commit: str) -> Path:
    builder = Builder(local_repo(repo, commit), build)
    built = builder.build(commit)
    if not built.ok:
        raise TreeFailed(f"{commit[:12]} does not build with `{build}`:\n{built.log_tail}")
    return builder.tree(commit)
