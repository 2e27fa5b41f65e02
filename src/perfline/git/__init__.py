"""The one place perfline runs git: revisions, first-parent history, worktrees, commit facts."""

from perfline.git.repo import (
    Commit,
    GitError,
    RangeError,
    add_worktree,
    changed_functions,
    commit_info,
    first_parent,
    first_parent_range,
    has_path,
    is_ancestor,
    prune_worktrees,
    remove_worktree,
    resolve,
    resolve_or_none,
    tags,
    topo_positions,
)

__all__ = [
    "Commit",
    "GitError",
    "RangeError",
    "add_worktree",
    "changed_functions",
    "commit_info",
    "first_parent",
    "first_parent_range",
    "has_path",
    "is_ancestor",
    "prune_worktrees",
    "remove_worktree",
    "resolve",
    "resolve_or_none",
    "tags",
    "topo_positions",
]
