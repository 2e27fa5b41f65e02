"""Commits of a range, each checked out in its own git worktree and built once.

The user's checkout is never touched: every commit gets a detached worktree under
perfline's cache, and its build result is kept there, keyed by the build command, so a
resumed bisection builds nothing twice. git records each worktree under the
repository's .git/worktrees; `release` removes the trees and those records when the
bisection ends.

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

from perfline import git
from perfline.system.files import write_durably
from perfline.system.process import tail

BUILD_TIMEOUT_S = 3 * 3600.0
COMPLETE = ".perfline-worktree-complete"


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


class Builder:
    def __init__(self, repo: Path, build: str, root: Path | None = None) -> None:
        self.repo = repo.resolve()
        self.command = build
        digest = hashlib.sha256(str(self.repo).encode()).hexdigest()[:16]
        self.root = (root or cache_dir()) / digest
        # Results are keyed by the build command: changing the command rebuilds.
        self.key = hashlib.sha256(build.encode()).hexdigest()[:12]
        # When the last build this process ran ended (time.monotonic()), if any: a
        # sample right after it waits for the machine to settle (bisect.measure).
        self.last_built_at: float | None = None

    def tree(self, sha: str) -> Path:
        """The commit's worktree, created on first use and again if it was cut short."""
        path = self.root / sha
        if not (path / COMPLETE).exists():
            self.drop_tree(sha)
            path.parent.mkdir(parents=True, exist_ok=True)
            git.add_worktree(self.repo, path, sha)
            write_durably(path / COMPLETE, f"{sha}\n")
        return path

    def drop_tree(self, sha: str) -> None:
        """Remove the commit's worktree, whole or half-made, and git's record of it."""
        path = self.root / sha
        if not path.exists():
            return
        git.remove_worktree(self.repo, path)
        # What git did not take for a worktree (killed before it wrote .git) is only files.
        shutil.rmtree(path, ignore_errors=True)

    def release(self, shas: list[str]) -> None:
        """Remove these commits' worktrees and prune git's records of them: the
        repository keeps no trace of perfline once a bisection has ended."""
        for sha in shas:
            self.drop_tree(sha)
        git.prune_worktrees(self.repo)

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
        self.last_built_at = time.monotonic()
        return Build(ok, self.last_built_at - started, tail(output), cached=False)

    def record(self, sha: str, build: Build) -> Build:
        """Written last and atomically: a build killed before this is built again."""
        write_durably(self.result_path(sha), f"{'ok' if build.ok else 'failed'} {build.seconds:.3f}\n{build.log_tail}")
        return build
