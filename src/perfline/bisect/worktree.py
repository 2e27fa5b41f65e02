"""Commits of a range, each checked out in its own git worktree and built once.

The user's checkout is never touched: every commit gets a detached worktree under
perfline's cache, and its build result is kept there, keyed by the build command, so a
resumed bisection (or a second one over the same range) builds nothing twice.

A worktree counts only once its completion marker exists, written after `git worktree
add` returned: a kill during the checkout (14 s for a kernel tree) leaves a directory
with a `.git` but without all of its files, and building that would bisect a tree that
is not the commit.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from perfline.system.files import write_durably
from perfline.system.process import tail

BUILD_TIMEOUT_S = 3 * 3600.0
COMPLETE = ".perfline-worktree-complete"


class RangeError(ValueError):
    """The good/bad range cannot be bisected; the message says why."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str


@dataclass(frozen=True)
class Build:
    ok: bool
    seconds: float
    log_tail: str
    cached: bool


def cache_dir() -> Path:
    configured = os.environ.get("PERFLINE_CACHE_DIR")
    base = Path(configured) if configured else Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    ) / "perfline"
    return base / "bisect"


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RangeError(f"{repo}: git {args[0]}: {proc.stderr.strip() or 'failed'}")
    return proc.stdout


def commit_range(repo: Path, good: str, bad: str) -> list[Commit]:
    """good, then the first-parent history up to bad, oldest first.

    First-parent order walks a merge-heavy history (like the kernel's) along the
    mainline: a merge that brought the change in is found first, and bisecting into the
    merged branch is a second bisection over that branch.
    """
    good_sha, bad_sha = (git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}").strip() for rev in (good, bad))
    ancestor = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", good_sha, bad_sha], check=False)
    if ancestor.returncode != 0:
        raise RangeError(f"{good} is not an ancestor of {bad}: nothing to bisect between them")
    fmt = "--format=%H%x1f%s%x1f%an"
    lines = git(repo, "log", "-1", fmt, good_sha).splitlines()
    lines += git(repo, "log", "--first-parent", "--reverse", fmt, f"{good_sha}..{bad_sha}").splitlines()
    commits = [Commit(*line.split("\x1f", 2)) for line in lines if line]
    if len(commits) < 2:
        raise RangeError(f"{good}..{bad} is empty: the good and bad commits are the same")
    return commits


class Builder:
    def __init__(self, repo: Path, build: str, root: Path | None = None) -> None:
        self.repo = repo.resolve()
        self.command = build
        digest = hashlib.sha256(str(self.repo).encode()).hexdigest()[:16]
        self.root = (root or cache_dir()) / digest
        # Results are keyed by the build command: changing the command rebuilds.
        self.key = hashlib.sha256(build.encode()).hexdigest()[:12]

    def tree(self, sha: str) -> Path:
        """The commit's worktree, created on first use and again if it was cut short."""
        path = self.root / sha
        if not (path / COMPLETE).exists():
            self.drop_tree(sha)
            path.parent.mkdir(parents=True, exist_ok=True)
            git(self.repo, "worktree", "add", "--detach", "--force", str(path), sha)
            write_durably(path / COMPLETE, f"{sha}\n")
        return path

    def drop_tree(self, sha: str) -> None:
        """Remove the commit's worktree, whole or half-made, and git's record of it."""
        path = self.root / sha
        if not path.exists():
            return
        # Twice --force: git locks a worktree while adding it, and a kill leaves the lock.
        subprocess.run(["git", "-C", str(self.repo), "worktree", "remove", "--force", "--force", str(path)],
                       capture_output=True, check=False)
        # What git did not take for a worktree (killed before it wrote .git) is only files.
        shutil.rmtree(path, ignore_errors=True)

    def result_path(self, sha: str) -> Path:
        """Where the build's outcome is recorded: in the worktree, which keeps the build."""
        return self.root / sha / f".perfline-build-{self.key}"

    def recorded(self, sha: str) -> Build | None:
        """The commit's build as recorded, if it finished."""
        path = self.result_path(sha)
        if not path.is_file():
            return None
        status, _, log = path.read_text().partition("\n")
        ok, seconds = status.split()
        return Build(ok == "ok", float(seconds), log, cached=True)

    def build(self, sha: str) -> Build:
        tree = self.tree(sha)
        return self.recorded(sha) or self.record(sha, self.run_build(tree))

    def run_build(self, tree: Path) -> Build:
        started = time.monotonic()
        try:
            proc = subprocess.run(["/bin/sh", "-c", self.command], cwd=tree, capture_output=True,
                                  text=True, timeout=BUILD_TIMEOUT_S, check=False)
            ok, output = proc.returncode == 0, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            ok, output = False, f"build timed out after {BUILD_TIMEOUT_S:.0f} s"
        return Build(ok, time.monotonic() - started, tail(output), cached=False)

    def record(self, sha: str, build: Build) -> Build:
        """Written last and atomically: a build killed before this is built again."""
        write_durably(self.result_path(sha), f"{'ok' if build.ok else 'failed'} {build.seconds:.3f}\n{build.log_tail}")
        return build
