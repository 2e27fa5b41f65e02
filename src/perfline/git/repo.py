"""git, run as a program: every question perfline asks a repository.

Each function takes the repository's path first. A path that is not a repository and
a revision the repository lacks are `GitError`s whose one line names both, so a user
sees `error: /src/linux: unknown revision 'v6.99'` and not git's usage text.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from perfline.records.errors import UserError

# ASCII unit separator: cannot occur in a subject, an author or a date.
_SEP = "\x1f"
# `git show -U0` hunk headers end with the enclosing function's line, as git finds it
# with the file type's funcname rule (the C default: a line starting with a letter).
_HUNK = re.compile(r"^@@ [^@]+ @@ ?(.*)$")
_FUNCTION_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
# scheme://… or scp-like user@host:path; anything else is a directory.
_URL = re.compile(r"[a-z][a-z0-9+.-]*://|[^/\s]+@[^/\s]+:")


class GitError(UserError):
    """git could not answer: no repository, an unknown revision, a failed command."""


class RangeError(GitError):
    """A good..bad range that cannot be bisected (not an ancestor, empty)."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str
    date: datetime | None = None  # committer date


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed (apt-get install git)") from None
    if check and proc.returncode != 0:
        raise _error(repo, args, proc.stderr)
    return proc


def _error(repo: Path, args: tuple[str, ...], stderr: str) -> GitError:
    text = stderr.strip()
    if not repo.is_dir():
        return GitError("no such directory (a git repository was expected)", repo)
    if "not a git repository" in text:
        return GitError("not a git repository", repo)
    unknown = re.search(r"(?:bad revision|unknown revision|ambiguous argument|Needed a single revision)"
                        r"[^']*'?([^'\n]*)", text)
    if unknown:
        return GitError(f"unknown revision {unknown.group(1) or args[-1]!r}", repo)
    # git prints progress ("Preparing worktree ...") before what went wrong.
    lines = text.splitlines()
    said = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[0] if lines else "failed")
    return GitError(f"git {args[0]}: {said}", repo)


def _out(repo: Path, *args: str) -> str:
    return _git(repo, *args).stdout


def resolve(repo: Path, rev: str) -> str:
    """The full sha of the commit `rev` names (a sha, abbreviation, tag, branch, HEAD~3)."""
    sha = resolve_or_none(repo, rev)
    if sha is None:
        _out(repo, "rev-parse", "--git-dir")  # a missing repository says so first
        raise GitError(f"unknown revision {rev!r}", repo)
    return sha


def resolve_or_none(repo: Path, rev: str) -> str | None:
    """The full sha of `rev`, or None when the repository does not have it."""
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    return _git(repo, "merge-base", "--is-ancestor", older, newer, check=False).returncode == 0


def parents(repo: Path, rev: str) -> list[str]:
    """The full shas of the commit's parents, first parent first (two or more: a merge)."""
    return _out(repo, "rev-list", "--parents", "-n", "1", resolve(repo, rev)).split()[1:]


def merge_base(repo: Path, one: str, other: str) -> str | None:
    """The newest commit both histories hold; None when they share none, or when `one`
    or `other` is gone from the repository (a rewritten branch's old commits, pruned)."""
    proc = _git(repo, "merge-base", one, other, check=False)
    base = proc.stdout.strip() if proc.returncode == 0 else ""
    return base or None


def _commits(text: str) -> list[Commit]:
    commits = []
    for line in text.splitlines():
        if not line:
            continue
        sha, subject, author, date = line.split(_SEP, 3)
        commits.append(Commit(sha, subject, author, datetime.fromisoformat(date) if date else None))
    return commits


_FORMAT = f"--format=%H{_SEP}%s{_SEP}%an{_SEP}%cI"


def commit_info(repo: Path, rev: str) -> Commit:
    [commit] = _commits(_out(repo, "log", "-1", _FORMAT, resolve(repo, rev)))
    return commit


def first_parent(repo: Path, since: str | None, head: str) -> list[Commit]:
    """The first-parent history after `since` (exclusive; None: from the root) up to
    `head`, oldest first: the mainline of a merge-heavy history such as the kernel's."""
    head_sha = resolve(repo, head)
    walk = f"{resolve(repo, since)}..{head_sha}" if since else head_sha
    return _commits(_out(repo, "log", "--first-parent", "--reverse", _FORMAT, walk))


def first_parent_range(repo: Path, good: str, bad: str) -> list[Commit]:
    """good, then the first-parent history up to bad, oldest first.

    First-parent order walks a merge-heavy history along the mainline: a merge that
    brought a change in is found first, and bisecting into the merged branch is a second
    bisection over that branch.
    """
    good_sha, bad_sha = resolve(repo, good), resolve(repo, bad)
    if not is_ancestor(repo, good_sha, bad_sha):
        raise RangeError(f"{good} is not an ancestor of {bad}: nothing to bisect between them", repo)
    commits = [commit_info(repo, good_sha), *first_parent(repo, good_sha, bad_sha)]
    if len(commits) < 2:
        raise RangeError(f"{good}..{bad} is empty: the good and bad commits are the same", repo)
    return commits


def topo_positions(repo: Path, revs: set[str]) -> dict[str, int]:
    """Position of each revision in topological order (oldest first).

    Only the history between the revisions' merge base and the revisions is walked, so a
    kernel tree's million commits are not listed to order a few dozen runs.
    """
    full = {rev: resolve(repo, rev) for rev in revs}
    base = _out(repo, "merge-base", "--octopus", *full.values()).strip() if len(full) > 1 else ""
    walk = _out(repo, "rev-list", "--topo-order", "--reverse", *full.values(),
                *(["--not", f"{base}^@"] if base else []))
    position = {sha: i for i, sha in enumerate(walk.split())}
    return {rev: position[sha] for rev, sha in full.items()}


def tags(repo: Path, pattern: str, on: str) -> list[tuple[str, str]]:
    """(tag, commit sha) of every tag matching the glob `pattern` whose commit is on the
    first-parent history of `on`, oldest commit first."""
    mainline = {c.sha: i for i, c in enumerate(first_parent(repo, None, on))}
    found = []
    for line in _out(repo, "tag", "--list", "--format=%(refname:strip=2)").splitlines():
        if line and fnmatch.fnmatchcase(line, pattern):
            sha = resolve(repo, line)
            if sha in mainline:
                found.append((line, sha))
    return sorted(found, key=lambda tag: mainline[tag[1]])


def has_path(repo: Path, rev: str, path: str) -> bool:
    """Whether `path` exists in the tree of `rev`."""
    return _git(repo, "cat-file", "-e", f"{rev}:{path}", check=False).returncode == 0


def changed_functions(repo: Path, rev: str) -> list[str]:
    """The functions whose bodies the commit's diff touches, by name, from its hunk
    headers: what a profile of the culprit should be read against."""
    names: list[str] = []
    for line in _out(repo, "show", "-U0", "--format=", resolve(repo, rev)).splitlines():
        hunk = _HUNK.match(line)
        if hunk and (name := _FUNCTION_NAME.search(hunk.group(1))) and name.group(1) not in names:
            names.append(name.group(1))
    return names


def add_worktree(repo: Path, path: Path, sha: str) -> None:
    """A detached worktree of `sha` at `path`, over a half-made one: git locks a worktree's
    record while adding it, so one killed then leaves a locked record of a directory that
    may not exist, which only a second --force lets `add` take over."""
    _out(repo, "worktree", "add", "--detach", "--force", "--force", str(path), sha)


def remove_worktree(repo: Path, path: Path) -> None:
    """Remove a worktree and git's record of it; a missing one is not an error."""
    # Twice --force: git locks a worktree while adding it, and a kill leaves the lock.
    _git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)


def prune_worktrees(repo: Path) -> None:
    """Drop git's records (.git/worktrees/*) of worktrees whose directory is gone."""
    _git(repo, "worktree", "prune", check=False)


def is_url(repo: str) -> bool:
    """Whether a repository is named by a URL (cloned and fetched) rather than a path."""
    return _URL.match(repo) is not None


def clone_or_fetch(url: str, path: Path) -> None:
    """A clone of `url` at `path`, brought up to date (`origin/*` refs) if it exists."""
    if (path / ".git").exists():
        _out(path, "fetch", "--quiet", "--tags", "origin")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    _out(path.parent, "clone", "--quiet", url, str(path))
