"""Commits of a tree, each checked out in its own git worktree and built once.

The user's checkout is never touched: every commit gets a detached worktree under
perfline's cache, and its build result is kept there, keyed by the build command, so a
resumed bisection or tracker builds nothing twice. git records each worktree under the
repository's .git/worktrees; `release` removes the trees and those records.

The fault rules, so that a kill at any moment changes nothing in an answer:

- A worktree counts only once its completion marker exists, written after `git worktree
  add` returned: a kill during the checkout (14 s for a kernel tree) leaves a directory
  with a `.git` but without all of its files.
- A build counts only once its result is recorded, written last and atomically. A build
  that started (its start marker exists) and recorded nothing was cut short: its tree is
  thrown away and checked out afresh before building again, because an interrupted
  `make` leaves half-written outputs newer than their sources, which the next `make`
  takes as up to date (a kill during the link left a truncated `bench` that exited 126,
  and its commit was judged untestable).
- `rebuild` (after a benchmark failed at the commit) forgets the result and builds from
  a fresh checkout: a failure that a fresh build cures was the build's, not the commit's.
- A build that fails the way a machine fails rather than a commit (the build or a
  compiler in it killed by a signal, as the OOM killer does; no space left, no memory; a
  timeout) is built once more from a fresh checkout before its failure is recorded: a
  failed build makes its commit untestable for good, and a bisection's answer a range.
  A compile error is not retried (a kernel build is tens of minutes).
- Builds of one commit are serialised by a lock per commit: every process of this host
  that shares the cache (fleet workers, a tracker, a bisection) waits for the other.
- A build holds the machine's measuring lock (system.measuring): another perfline's run
  waits for it rather than measuring beside a `make -j`.
- A dropped tree is first renamed aside, so a build process that outlived a killed
  perfline writes into the discarded copy, never into the fresh checkout.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from perfline import git
from perfline.system.disturbances import wait_for_quiet
from perfline.system.env_settings import env_number
from perfline.system.files import locked, write_durably
from perfline.system.measuring import measuring_alone
from perfline.system.process import tail
from perfline.targets import kernels

BUILD_TIMEOUT_S = 3 * 3600.0
COMPLETE = ".perfline-worktree-complete"
# A run this soon after a build of this process waits for the CPUs to go quiet first:
# what the build left running (a linker, ccache's cleanup) must not be measured.
SETTLE_AFTER_BUILD_S = 30.0
# The most it waits ($PERFLINE_SETTLE_S, 0: never): a benchmark whose samples are not
# timed (perfline's own tests set bench.c's noise) has nothing for a busy CPU to spoil.
SETTLE_ENV, SETTLE_MAX_S = "PERFLINE_SETTLE_S", 5.0


# What a build's output says when the machine, not the commit, made it fail: gcc's
# "Killed signal terminated program cc1" (the OOM killer), make's "Killed", a full disk,
# memory or process limits.
MACHINE_FAILURE = re.compile(r"\bKilled\b|terminated by signal|No space left on device|Cannot allocate memory"
                             r"|out of memory|Resource temporarily unavailable", re.IGNORECASE)


@dataclass(frozen=True)
class Build:
    ok: bool
    seconds: float
    log_tail: str
    cached: bool
    # Failed the way a machine fails (MACHINE_FAILURE, a signal, the timeout): built again.
    machine_failure: bool = False


def cache_dir() -> Path:
    """Where commits are checked out and built, under perfline's cache."""
    return kernels.cache_dir() / "worktrees"


class Builder:
    def __init__(self, repo: Path, build: str, root: Path | None = None,
                 announce: Callable[[str], None] = lambda _: None) -> None:
        self.repo = repo.resolve()
        self.command = build
        self.announce = announce  # what the user should know (a build waiting for the machine)
        digest = hashlib.sha256(str(self.repo).encode()).hexdigest()[:16]
        self.root = (root or cache_dir()) / digest
        # Results are keyed by the build command: changing the command rebuilds.
        self.key = hashlib.sha256(build.encode()).hexdigest()[:12]
        # When the last build this process ran ended (time.monotonic()), if any.
        self.last_built_at: float | None = None

    # -- trees ------------------------------------------------------------------------

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
        aside = path.with_name(f".dropped-{sha}-{os.getpid()}-{time.monotonic_ns()}")
        path.rename(aside)
        git.remove_worktree(self.repo, path)  # git's record, locked or not; the files are aside
        shutil.rmtree(aside, ignore_errors=True)

    def release(self, shas: list[str]) -> None:
        """Remove these commits' worktrees and prune git's records of them: the
        repository keeps no trace of perfline once a bisection has ended."""
        for sha in shas:
            self.drop_tree(sha)
        git.prune_worktrees(self.repo)

    # -- builds -----------------------------------------------------------------------

    def result_path(self, sha: str) -> Path:
        """Where the build's outcome is recorded: in the worktree, which keeps the build."""
        return self.root / sha / f".perfline-build-{self.key}"

    def started_path(self, sha: str) -> Path:
        """Written before the build command runs: a tree with it and without a result
        holds an interrupted build's outputs."""
        return self.root / sha / f".perfline-building-{self.key}"

    def recorded(self, sha: str) -> Build | None:
        """The commit's build as recorded, if it finished."""
        path = self.result_path(sha)
        if not path.is_file():
            return None
        status, _, log = path.read_text().partition("\n")
        ok, seconds = status.split()
        return Build(ok == "ok", float(seconds), log, cached=True)

    def build(self, sha: str) -> Build:
        """The commit built with the command: the recorded result, or a build now."""
        with locked(self.root / ".locks" / sha):
            built = self.recorded(sha)
            if built is None:
                if self.started_path(sha).exists():
                    self.drop_tree(sha)  # an interrupted build: from a fresh checkout
                tree, made = self.build_in_tree(sha)
                if made.machine_failure:
                    self.drop_tree(sha)
                    tree, made = self.build_in_tree(sha)
                    made = replace(made, log_tail=f"{made.log_tail}\n(built twice, the second time from a fresh "
                                                  "checkout: the first build failed the way a machine fails)")
                self.keep(tree, sha, made)
                built = self.record(sha, made)
            self.done(sha)
            return built

    def rebuild(self, sha: str) -> Build:
        """The commit built again from a fresh checkout, its recorded result forgotten."""
        with locked(self.root / ".locks" / sha):
            self.result_path(sha).unlink(missing_ok=True)
            self.drop_tree(sha)
        return self.build(sha)

    def build_in_tree(self, sha: str) -> tuple[Path, Build]:
        """The build command run in the commit's worktree (checked out if missing), its
        start marked first."""
        tree = self.tree(sha)
        write_durably(self.started_path(sha), f"{self.command}\n")
        return tree, self.run_build(tree)

    def run_build(self, tree: Path) -> Build:
        # A build is the heaviest load perfline puts on a machine: it holds the machine's
        # measuring lock, so another perfline's run does not measure during it.
        with measuring_alone(f"building {tree.name[:12]} of {self.repo.name}", self.announce):
            return self._run_build(tree)

    def _run_build(self, tree: Path) -> Build:
        started = time.monotonic()
        try:
            proc = subprocess.run(["/bin/sh", "-c", self.command], cwd=tree, capture_output=True,
                                  text=True, timeout=BUILD_TIMEOUT_S, check=False)
            ok, output = proc.returncode == 0, proc.stdout + proc.stderr
            # A signal: negative for sh itself, 128 + N from sh for the command it ran.
            machine = not ok and (proc.returncode < 0 or proc.returncode > 128
                                  or MACHINE_FAILURE.search(output) is not None)
        except subprocess.TimeoutExpired:
            ok, output, machine = False, f"build timed out after {BUILD_TIMEOUT_S:.0f} s", True
        self.last_built_at = time.monotonic()
        return Build(ok, self.last_built_at - started, tail(output), cached=False, machine_failure=machine)

    def keep(self, tree: Path, sha: str, made: Build) -> None:
        """What a build keeps once it ran (a kernel build copies its image out)."""

    def record(self, sha: str, build: Build) -> Build:
        """Written last and atomically: a build killed before this is built again."""
        write_durably(self.result_path(sha), f"{'ok' if build.ok else 'failed'} {build.seconds:.3f}\n{build.log_tail}")
        return build

    def done(self, sha: str) -> None:
        """After the build is known (a kernel build drops its 4 GB tree)."""

    def settle(self) -> None:
        """Before a measurement: wait for quiet CPUs if this process built a moment ago."""
        if self.last_built_at is None or time.monotonic() - self.last_built_at >= SETTLE_AFTER_BUILD_S:
            return
        if (most := env_number(SETTLE_ENV, SETTLE_MAX_S)) > 0:
            wait_for_quiet(max_s=most)
