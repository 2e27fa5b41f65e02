"""A culprit that is a merge, and the branch it brought in.

A bisection walks the first-parent history (docs/bisect.md), the mainline of a
merge-heavy tree: in Linus's tree nearly every first-parent commit is a merge of a
maintainer's tree, so the first bad commit found there is most often "Merge tag
'sched-core-...'". The change is then one of the commits that merge brought in: the
first-parent history of its second parent from where that branch left the mainline,
a range to bisect in turn (and again if its culprit is a merge of a topic branch).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfline import git
from perfline.store.bisections import BisectionRecord

# Linus's tree merges maintainer trees, which merge topic branches, which now and then
# merge another: deeper than this the answer stays the merge found.
MAX_DEPTH = 4


@dataclass(frozen=True)
class MergedBranch:
    """What a merge brought in: the first-parent history of `tip` after `fork`."""

    merge: str  # the merge commit
    fork: str  # where the merged branch left the mainline (the parents' merge base)
    tip: str  # the merged branch's last commit (the merge's second parent)


def merged_branch(repo: Path, sha: str) -> MergedBranch | None:
    """The branch the commit merged in; None when it is no merge, an octopus (several
    branches, not one range), or a merge that brought in no commit of its own."""
    parents = git.parents(repo, sha)
    if len(parents) != 2:
        return None
    fork = git.merge_base(repo, *parents)
    if fork is None or fork == parents[1]:
        return None
    return MergedBranch(sha, fork, parents[1])


def entered_at(culprit: str, bisection: BisectionRecord) -> str | None:
    """The commit of the first-parent `bisection` where `culprit` came into the branch:
    the culprit itself, or, for one inside the branch a merge brought in, that merge (the
    bisection's own answer); None when the bisection holds neither."""
    if culprit in bisection.spec.commits:
        return culprit
    merge = (bisection.result or {}).get("culprit")
    return merge if merge in bisection.spec.commits else None
