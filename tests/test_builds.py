"""builds.worktree.Builder with real git worktrees and real shell builds: a build that
fails the way a machine fails (killed, out of memory or disk) is built again from a fresh
checkout before its failure is recorded; a compile error is recorded at once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from perfline.builds.worktree import Builder


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    monkeypatch.setenv("PERFLINE_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.c").write_text("int main(void) { return 0; }\n")
    git = ["git", "-C", str(src), "-c", "user.name=Dev", "-c", "user.email=dev@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    return src, subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                               check=True).stdout.strip()


def failing_first(tmp_path: Path, failure: str) -> str:
    """A build whose first attempt fails by `failure` (a shell snippet), then compiles;
    each attempt leaves a file in the worktree and counts itself outside it."""
    count = tmp_path / "builds"
    return (f"n=$(($(cat {count} 2>/dev/null || echo 0) + 1)); echo $n > {count}; "
            f"[ -e leftover ] && echo 'not a fresh checkout' && exit 1; touch leftover; "
            f"if [ $n -eq 1 ]; then {failure}; fi; cc -o main main.c")


@pytest.mark.parametrize("failure", [
    "echo 'gcc: fatal error: Killed signal terminated program cc1' >&2; exit 1",  # the OOM killer, as gcc says it
    "echo 'main.o: No space left on device' >&2; exit 2",
    "kill -9 $$",  # the build's shell itself killed
    "sh -c 'kill -9 $$'; exit $?",  # a command of the build killed: 137 from sh
], ids=["oom-killed-compiler", "disk-full", "shell-killed", "command-killed"])
def test_a_build_that_failed_the_way_a_machine_fails_is_built_again_from_a_fresh_checkout(
        repo: tuple[Path, str], tmp_path: Path, failure: str) -> None:
    src, sha = repo
    built = Builder(src, failing_first(tmp_path, failure)).build(sha)
    assert built.ok, built.log_tail
    assert (tmp_path / "builds").read_text().strip() == "2"
    assert "built twice, the second time from a fresh checkout" in built.log_tail
    assert Builder(src, failing_first(tmp_path, failure)).build(sha).cached  # recorded: not built a third time


def test_a_compile_error_is_recorded_at_once_and_a_second_machine_failure_too(repo: tuple[Path, str],
                                                                               tmp_path: Path) -> None:
    src, sha = repo
    broken = Builder(src, failing_first(tmp_path, "echo \"main.c:1: error: expected ';'\" >&2; exit 2")).build(sha)
    assert not broken.ok and (tmp_path / "builds").read_text().strip() == "1"
    (tmp_path / "builds").unlink()
    always = Builder(src, "echo $$ >> ../killed-builds; echo 'cc1: Killed signal terminated program' >&2; exit 1")
    failed = always.build(sha)
    assert not failed.ok and "the first build failed the way a machine fails" in failed.log_tail
    assert len((always.root / "killed-builds").read_text().split()) == 2
