"""The git package against real repositories made here: revisions, first-parent
history, tags, worktrees, changed functions, and one-line errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from perfline import git


def run_git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Dev", "-c", "user.email=dev@example.org",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def commit(repo: Path, name: str, text: str, subject: str) -> str:
    (repo / name).write_text(text)
    run_git(repo, "add", name)
    run_git(repo, "commit", "-q", "-m", subject)
    return run_git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """main: c0 c1 c2 (merge of a side branch with s1) c3."""
    path = tmp_path / "repo"
    path.mkdir()
    run_git(path, "init", "-q", "-b", "main")
    shas = [commit(path, "f.c", "int f(void)\n{\n\treturn 0;\n}\n", "c0")]
    shas.append(commit(path, "f.c", "int f(void)\n{\n\treturn 1;\n}\n", "sched: c1"))
    run_git(path, "checkout", "-q", "-b", "side")
    side = commit(path, "g.c", "int g(void)\n{\n\treturn 2;\n}\n", "s1")
    run_git(path, "checkout", "-q", "main")
    run_git(path, "merge", "-q", "--no-ff", "-m", "c2 merge side", "side")
    shas.append(run_git(path, "rev-parse", "HEAD"))
    shas.append(commit(path, "f.c", "int f(void)\n{\n\treturn 3;\n}\n", "c3"))
    run_git(path, "tag", "v1", shas[1])
    run_git(path, "tag", "v2", shas[3])
    run_git(path, "tag", "other", shas[0])
    run_git(path, "tag", "vside", side)
    return path, shas


def test_resolve_and_errors(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, shas = repo
    assert git.resolve(path, "HEAD~1") == shas[2]
    assert git.resolve(path, shas[0][:8]) == shas[0]
    assert git.resolve_or_none(path, "nope") is None
    with pytest.raises(git.GitError) as unknown:
        git.resolve(path, "v9.99")
    assert str(unknown.value) == f"{path}: unknown revision 'v9.99'"
    (tmp_path / "plain").mkdir()
    with pytest.raises(git.GitError, match="not a git repository"):
        git.resolve(tmp_path / "plain", "HEAD")
    with pytest.raises(git.GitError, match="no such directory"):
        git.resolve(tmp_path / "missing", "HEAD")


def test_first_parent_history_skips_the_merged_branch(repo: tuple[Path, list[str]]) -> None:
    path, shas = repo
    assert [c.sha for c in git.first_parent(path, shas[0], "main")] == shas[1:]
    assert [c.subject for c in git.first_parent(path, None, "main")] == ["c0", "sched: c1", "c2 merge side", "c3"]
    commits = git.first_parent_range(path, shas[1], shas[3])
    assert [c.sha for c in commits] == shas[1:]
    assert commits[0].author == "Dev" and commits[0].date is not None
    with pytest.raises(git.RangeError, match="not an ancestor"):
        git.first_parent_range(path, shas[3], shas[1])
    with pytest.raises(git.RangeError, match="is empty"):
        git.first_parent_range(path, shas[2], shas[2])


def test_tags_on_the_mainline_in_history_order(repo: tuple[Path, list[str]]) -> None:
    path, shas = repo
    assert git.tags(path, "v*", "main") == [("v1", shas[1]), ("v2", shas[3])]  # vside is not on it


def test_topo_positions_and_ancestry(repo: tuple[Path, list[str]]) -> None:
    path, shas = repo
    positions = git.topo_positions(path, {shas[3], shas[0], "v1"})
    assert positions[shas[0]] < positions["v1"] < positions[shas[3]]
    assert git.is_ancestor(path, shas[0], shas[3]) and not git.is_ancestor(path, shas[3], shas[0])


def test_changed_functions_and_paths(repo: tuple[Path, list[str]]) -> None:
    path, shas = repo
    assert git.changed_functions(path, shas[3]) == ["f"]
    assert git.has_path(path, shas[2], "g.c") and not git.has_path(path, shas[1], "g.c")
    assert git.commit_info(path, "v1").subject == "sched: c1"


def test_worktrees_leave_no_record_once_removed(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, shas = repo
    tree = tmp_path / "wt"
    git.add_worktree(path, tree, shas[1])
    assert (tree / "f.c").read_text().endswith("return 1;\n}\n")
    assert len(list((path / ".git" / "worktrees").iterdir())) == 1
    git.remove_worktree(path, tree)
    git.prune_worktrees(path)
    assert not tree.exists()
    assert not list((path / ".git" / "worktrees").glob("*"))


def test_a_worktree_add_killed_before_its_directory_is_made_again(repo: tuple[Path, list[str]],
                                                                   tmp_path: Path) -> None:
    """A `git worktree add` killed after it locked its record, before its directory was
    made (a tracker SIGKILLed during a build's checkout): the next add at that path takes
    it over instead of failing on the missing but locked worktree."""
    path, shas = repo
    tree = tmp_path / "wt"
    git.add_worktree(path, tree, shas[1])
    run_git(path, "worktree", "lock", "--reason", "initializing", str(tree))
    subprocess.run(["rm", "-rf", str(tree)], check=True)
    git.add_worktree(path, tree, shas[1])
    assert (tree / ".git").exists()


def test_a_git_error_names_what_went_wrong_not_its_progress(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, shas = repo
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("not empty")
    with pytest.raises(git.GitError, match=r"git worktree: fatal: .*already exists"):
        git.add_worktree(path, tmp_path / "taken", shas[1])
