"""`perfline track` end to end on a real C program's history (examples/bisect/make-repo.sh):
real builds with make, real runs, a real bisection; killed with SIGKILL and run again.

The tracker file is the one of issue 20 (examples/track/demo.yaml). These tests are of
the loop's logic (resume, ranges, kills, only new commits), so bench.c's noise is set by
the test (tests/noise.py) rather than timed: the answer must not depend on the machine's
speed of the day. The pace guard is off: bench.c's values are not times."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import SCRIPT_SUBJECT, copy_tracked
from noise import SET_NOISE
from perfline.store import Store
from perfline.targets import kernels
from perfline.targets.kernels import Kernel

ROOT = Path(__file__).resolve().parents[1]
MAKE_REPO = ROOT / "examples" / "bisect" / "make-repo.sh"
TRACKER = ROOT / "examples" / "track" / "demo.yaml"
CULPRIT = 41  # make-repo.sh's default: commit 41 does 8% more work


def make_project(where: Path, monkeypatch: pytest.MonkeyPatch, *history: str,
                 env: dict[str, str] | None = None) -> Path:
    """make-repo.sh's history (its arguments `history`) at where/src, the demo tracker
    beside it, perfline's cache under `where` and bench.c's noise set (tests/noise.py)."""
    subprocess.run([str(MAKE_REPO), str(where / "src"), *history], check=True, env={**os.environ, **(env or {})})
    shutil.copy(TRACKER, where / "tracker.yaml")
    monkeypatch.setenv("PERFLINE_CACHE_DIR", str(where / "cache"))
    for name, value in SET_NOISE.items():
        monkeypatch.setenv(name, value)
    return where


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return make_project(tmp_path, monkeypatch)


def perfline(where: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfline", "--db", str(where / "db"), *args],
                          capture_output=True, text=True, timeout=timeout, check=False, cwd=where)


def track_run(where: Path) -> subprocess.CompletedProcess[str]:
    return perfline(where, "track", "run", "tracker.yaml", "--once")


def shas(where: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(where / "src"), "rev-list", "--reverse", "main"], capture_output=True,
                         text=True, check=True).stdout
    return out.split()


def runs_per_commit(where: Path) -> Counter[str]:
    """Completed runs of the tracker per commit, its confirmation's interleaved runs left out."""
    with sqlite3.connect(where / "db") as db:
        rows = db.execute("SELECT kernel_commit, settings FROM runs WHERE label = 'demo' AND status = 'completed'")
        return Counter(commit for commit, settings in rows if "interleaved" not in json.loads(settings))


def add_commits(where: Path, count: int) -> None:
    for i in range(count):
        (where / "src" / "NOTES").write_text(f"later change {i}\n")
        subprocess.run(["git", "-C", str(where / "src"), "-c", "user.name=Dev", "-c", "user.email=dev@example.org",
                        "commit", "-qam", f"later change {i}"], check=True)


def test_track_narrows_the_regression_to_its_commit_and_tests_only_new_commits(
        tracked_history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pass is conftest's tracked history (this tracker file's pass, whose
    culprit's subject and command carry hostile strings), shared with the report and
    dashboard tests instead of run again; the later passes run on a copy of it."""
    project = tracked_history
    commits = shas(project)
    selected = commits[23::8]  # since HEAD~40 = commit 23, every 8th: 23, 31, ..., 63 (the head)
    assert set(runs_per_commit(project)) == set(selected)
    assert all(n == 1 for n in runs_per_commit(project).values())

    listed = json.loads(perfline(project, "regressions", "--json").stdout)
    found = [r for r in listed if r["kind"] == "regression"]
    assert len(found) == 1, listed
    [regression] = found
    # The tested commits around the culprit, or a tested commit more on a side where the
    # noise cannot tell two splits apart (track.judging.change_span): the range holds the
    # culprit, and the bisection names it exactly.
    assert commits.index(regression["good"]) < CULPRIT <= commits.index(regression["bad"]), regression
    assert regression["status"] == "bisected"
    assert regression["culprit"] == commits[CULPRIT]
    assert regression["culprit_subject"] == f"sched/eevdf: {SCRIPT_SUBJECT}"
    assert regression["tracker"] == "demo" and regression["bisection"] == 1

    status = json.loads(perfline(project, "track", "status", "demo", "--json").stdout)[0]
    assert status["head"] == commits[-1] and status["last_tested"] == commits[-1]
    assert (status["tested"], status["pending"], status["open_regressions"]) == (6, 0, 1)
    # Six tested commits are too few to learn the series' noise from: the assumed 1%, said so.
    [noise] = status["noise"]
    assert (noise["benchmark"], noise["noise_pct"], noise["commits"], noise["learned"]) == ("command", 1.0, 0, False)
    number = status["daily_number"]
    # 8% more work: the number falls to about 93 (100/1.08) and its interval says so.
    assert number["ci"][1] < 100 and 88 < number["value"] < 97

    project = copy_tracked(tracked_history, tmp_path / "copy")
    monkeypatch.setenv("PERFLINE_CACHE_DIR", str(project / "cache"))
    for name, value in SET_NOISE.items():
        monkeypatch.setenv(name, value)
    again = track_run(project)
    assert again.returncode == 0, again.stderr
    assert sum(runs_per_commit(project).values()) == 6  # nothing new: nothing run

    add_commits(project, 8)
    later = track_run(project)
    assert later.returncode == 0, later.stderr
    runs = runs_per_commit(project)
    assert set(runs) == {*selected, shas(project)[-1]} and all(n == 1 for n in runs.values())
    graph = perfline(project, "track", "graph", "demo", "--png", str(project / "demo.png"))
    assert graph.returncode == 0, graph.stderr
    assert (project / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_killed_tracker_resumes_without_testing_a_commit_twice(project: Path) -> None:
    """SIGKILL once the bisection has taken a probe, then `track run` again: the tested
    commits keep their one run each, the same bisection goes on to the culprit."""
    db = project / "db"
    proc = subprocess.Popen([sys.executable, "-m", "perfline", "--db", str(db), "track", "run", "tracker.yaml",
                             "--once"], cwd=project, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    probes = 0
    while time.monotonic() < deadline and proc.poll() is None and probes == 0:
        time.sleep(0.05)
        if db.exists():
            try:
                with sqlite3.connect(db) as connection:
                    probes = connection.execute("SELECT count(*) FROM bisect_samples WHERE phase = 'bisect'"
                                                ).fetchone()[0]
            except sqlite3.OperationalError:
                pass  # the schema is still being made
    assert proc.poll() is None, "the tracker finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    resumed = track_run(project)
    assert resumed.returncode == 0, resumed.stderr
    runs = runs_per_commit(project)
    assert len(runs) == 6 and all(n == 1 for n in runs.values())
    [regression] = [r for r in json.loads(perfline(project, "regressions", "--json").stdout)
                    if r["kind"] == "regression"]
    assert regression["status"] == "bisected" and regression["culprit"] == shas(project)[CULPRIT]
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM bisections").fetchone()[0] == 1


# A build like `make` after a kill mid-link: an output that exists is taken as up to date.
# It first writes a truncated `bench` (a stub that exits 126, as the half-written binary
# of issue 31 did), waits, then compiles; a kill during the wait leaves the stub behind.
SLOW_BUILD = """#!/bin/sh
git rev-parse HEAD >> {log}
if [ ! -e bench ]; then
    printf '#!/bin/sh\\nexit 126\\n' > bench && chmod +x bench
    sleep 2
    cc -O1 -o bench bench.c -lm
fi
"""


def test_a_tracker_killed_during_the_culprits_build_names_the_exact_culprit(project: Path) -> None:
    """SIGKILL while the culprit's tree is being built, then `track run` again: the build
    is redone from a fresh checkout (not taken as up to date), no run fails, and the
    bisection names the culprit, not its neighbour."""
    log = project / "builds.log"
    (project / "slow-build.sh").write_text(SLOW_BUILD.format(log=log))
    (project / "slow-build.sh").chmod(0o755)
    text = (project / "tracker.yaml").read_text().replace("build: make -s", f"build: {project / 'slow-build.sh'}")
    (project / "tracker.yaml").write_text(text)
    culprit = shas(project)[CULPRIT]
    proc = subprocess.Popen([sys.executable, "-m", "perfline", "--db", str(project / "db"), "track", "run",
                             "tracker.yaml", "--once"], cwd=project,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and culprit in log.read_text().split():
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the tracker finished (or never built the culprit) before it could be killed"
    time.sleep(0.5)  # inside the build's wait: the stub is written, the compiler not yet run
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    resumed = track_run(project)
    assert resumed.returncode == 0, resumed.stderr
    [regression] = [r for r in json.loads(perfline(project, "regressions", "--json").stdout)
                    if r["kind"] == "regression"]
    assert regression["status"] == "bisected" and regression["culprit"] == culprit, resumed.stderr[-3000:]
    assert regression["culprits"] == []
    # Built again from a fresh checkout (and again for the profiled A/B after the bisection
    # released its trees), and never run from the stub: no run failed.
    assert log.read_text().split().count(culprit) >= 2
    with sqlite3.connect(project / "db") as connection:
        assert connection.execute("SELECT count(*) FROM runs WHERE status = 'failed'").fetchone()[0] == 0
        assert connection.execute("SELECT status FROM bisections").fetchall() == [("found",)]


def test_a_commit_next_to_the_change_that_does_not_build_gives_a_range(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Commit 40 does not compile, 41 is the culprit: the answer is "any of 40 41", the
    bisection's status `range`, the record bisected with both, the report's subject the
    range; never 41 alone, whose parent was never measured."""
    make_project(tmp_path, monkeypatch, "64", str(CULPRIT), str(CULPRIT - 1))
    first = track_run(tmp_path)
    assert first.returncode == 0, first.stderr
    commits = shas(tmp_path)
    [regression] = [r for r in json.loads(perfline(tmp_path, "regressions", "--json").stdout)
                    if r["kind"] == "regression"]
    assert regression["status"] == "bisected", first.stderr[-3000:]
    assert regression["culprit"] is None
    assert [(c["sha"], c["why"]) for c in regression["culprits"]] == [
        (commits[CULPRIT - 1], "did not build"), (commits[CULPRIT], "measured bad")]
    with sqlite3.connect(tmp_path / "db") as connection:
        [(status, result)] = connection.execute("SELECT status, result FROM bisections").fetchall()
    assert status == "range"
    result = json.loads(result)
    assert result["culprit"] is None and result["culprits"] == commits[CULPRIT - 1:CULPRIT + 1]
    assert (result["parent"], result["first_bad_tested"]) == (commits[CULPRIT - 2], commits[CULPRIT])
    report = perfline(tmp_path, "report", "regression", "1")
    assert report.returncode == 0, report.stderr
    subject = report.stdout.splitlines()[0]
    assert f"{commits[CULPRIT - 1][:10]}..{commits[CULPRIT][:10]} (2 commits)" in subject, subject
    assert "the first bad commit could be any of: " + " ".join(c[:12] for c in commits[CULPRIT - 1:CULPRIT + 1]) \
        in report.stdout


def test_narrow_all_names_the_commit_of_an_improvement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`narrow: all` on a history whose commit 41 does 7.5% less work: the improvement is
    confirmed and bisected to that commit; `narrow: true` would leave it a record."""
    make_project(tmp_path, monkeypatch,
                 env={"CULPRIT_WORK": "1850000UL", "CULPRIT_SUBJECT": f"change {CULPRIT} (less work)"})
    (tmp_path / "tracker.yaml").write_text(TRACKER.read_text().replace("narrow: true ", "narrow: all  "))
    first = track_run(tmp_path)
    assert first.returncode == 0, first.stderr
    commits = shas(tmp_path)
    listed = json.loads(perfline(tmp_path, "regressions", "--json").stdout)
    assert [r["kind"] for r in listed] == ["improvement"], listed
    [improvement] = listed
    # The tested commits around the culprit, or a tested commit more on a side where the
    # noise cannot tell two splits apart (track.judging.change_span): the range holds the
    # culprit, and the bisection names it exactly.
    assert commits.index(improvement["good"]) < CULPRIT <= commits.index(improvement["bad"]), improvement
    assert improvement["status"] == "bisected", first.stderr[-3000:]
    assert improvement["culprit"] == commits[CULPRIT]
    assert improvement["culprit_subject"] == f"change {CULPRIT} (less work)"


def test_a_pass_started_while_one_runs_does_nothing_and_a_killed_ones_lock_is_gone(project: Path) -> None:
    """Cron starting `track run --once` while the last pass still runs (every commit
    selected, so it runs for a minute): the second exits 1 at once with one line naming
    the first's pid and runs nothing. The first is SIGKILLed; the next pass runs (the
    kernel dropped the lock) and no commit has two runs."""
    text = TRACKER.read_text().replace("narrow: true ", "narrow: false")
    (project / "tracker.yaml").write_text(text.replace("  every: 8 ", "  every: 1 "))
    first = subprocess.Popen([sys.executable, "-m", "perfline", "--db", str(project / "db"), "track", "run",
                              "tracker.yaml", "--once"], cwd=project, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        lock = project / "cache" / "track" / "demo" / "pass.lock"
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text().startswith(f"pid {first.pid} since ")):
            assert time.monotonic() < deadline and first.poll() is None, "the first pass never took the tracker"
            time.sleep(0.1)
        second = track_run(project)
        assert first.poll() is None  # still running: the second was turned away by it
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert second.returncode == 1, second.stderr
    assert second.stderr.startswith(f"error: tracker demo: a pass is already running (pid {first.pid} since ")
    assert len(second.stderr.splitlines()) == 1, second.stderr
    (project / "tracker.yaml").write_text(text)
    third = track_run(project)
    assert third.returncode == 0, third.stderr
    runs = runs_per_commit(project)
    assert set(shas(project)[23::8]) <= set(runs) and all(n == 1 for n in runs.values()), runs


def rewrite(src: Path, first: int, mark: str) -> list[str]:
    """Force-push as linux-next's daily rebuild does: commits `first`.. of main made anew
    (same trees, subjects ending in `mark`, so new shas), main moved to them. The new
    shas of main, oldest first."""
    old = shas(src.parent)
    parent = old[first - 1]
    for sha in old[first:]:
        subject = subprocess.run(["git", "-C", str(src), "log", "-1", "--format=%s", sha], capture_output=True,
                                 text=True, check=True).stdout.strip()
        parent = subprocess.run(["git", "-C", str(src), "-c", "user.name=Dev", "-c", "user.email=dev@example.org",
                                 "commit-tree", f"{sha}^{{tree}}", "-p", parent, "-m", f"{subject} {mark}"],
                                capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["git", "-C", str(src), "reset", "-q", "--hard", parent], check=True)
    return shas(src.parent)


def test_a_rewritten_branch_is_followed_and_records_of_its_old_commits_are_not_narrowed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """24 commits, commit 14 does 8% more work, every 4th of the last 16 tested (7, 11,
    ..., 23). Rewritten above `since` after the first pass: the second tests the new
    commits, opens a record of its own between the new 11 and 15 and bisects it to the
    new 14, and leaves the first pass's record (its commits gone from main) un-narrowed,
    saying why; the two histories' runs are never one series. Rewritten below `since`:
    tracking starts again at the file's `since` on the new history."""
    culprit = 14
    make_project(tmp_path, monkeypatch, "24", str(culprit))
    text = TRACKER.read_text().replace("  every: 8 ", "  every: 4 ").replace("since: HEAD~40", "since: HEAD~16")
    (tmp_path / "tracker.yaml").write_text(text.replace("narrow: true ", "narrow: false"))
    first = track_run(tmp_path)
    assert first.returncode == 0, first.stderr
    old = shas(tmp_path)
    [before] = json.loads(perfline(tmp_path, "regressions", "--json").stdout)
    assert old.index(before["good"]) < culprit <= old.index(before["bad"]), before

    (tmp_path / "tracker.yaml").write_text(text)  # narrow: true
    new = rewrite(tmp_path / "src", 9, "v2")
    assert new[:9] == old[:9] and not set(new[9:]) & set(old)
    second = track_run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"main was rewritten: the last pass's head {old[-1][:12]} is not on it" in second.stderr
    listed = {r["id"]: r for r in json.loads(perfline(tmp_path, "regressions", "--json").stdout)}
    assert sorted(listed) == [1, 2], listed
    gone, after = listed[1], listed[2]
    assert (gone["status"], gone["good"], gone["bad"]) == ("new", before["good"], before["bad"])
    assert gone["note"] == f"not narrowed: {before['good'][:12]}..{before['bad'][:12]} is no longer on main (rewritten)"
    assert new.index(after["good"]) < culprit <= new.index(after["bad"]), after
    assert after["status"] == "bisected" and after["culprit"] == new[culprit], second.stderr[-3000:]
    assert set(runs_per_commit(tmp_path)) == {*old[7::4], *new[11::4]}

    (tmp_path / "tracker.yaml").write_text(text.replace("narrow: true ", "narrow: false"))
    newer = rewrite(tmp_path / "src", 3, "v3")
    third = track_run(tmp_path)
    assert third.returncode == 0, third.stderr
    moved = f"main was rewritten below {old[7][:12]}, where tracking started: it starts again at {newer[7][:12]}"
    assert f"{moved} (since: HEAD~16)" in third.stderr
    status = json.loads(perfline(tmp_path, "track", "status", "demo", "--json").stdout)[0]
    assert (status["since"], status["head"], status["tested"], status["pending"]) == (newer[7], newer[-1], 5, 0)
    [third_record] = [r for r in json.loads(perfline(tmp_path, "regressions", "--json").stdout) if r["id"] == 3]
    assert newer.index(third_record["good"]) < culprit <= newer.index(third_record["bad"]), third_record


def git_in(src: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(src), "-c", "user.name=Dev", "-c", "user.email=dev@example.org", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def merged_history(src: Path, evil: bool) -> dict[str, str]:
    """bench.c's project with a mainline of 24 commits and a topic branch of 6, forked
    at mainline commit 8 and merged (--no-ff) as mainline commit 14. `evil`: the topic's
    commits leave the work alone and the merge commit itself adds 8% (a resolution that
    changes the code); else topic commit 3 does. Subjects to shas."""
    src.mkdir()
    git_in(src, "init", "-q", "-b", "main")
    for name in ("bench.c", "Makefile"):
        shutil.copy(MAKE_REPO.parent / name, src / name)
    work = src / "work.h"
    work.write_text("#define WORK 2000000UL\n")

    def commit(subject: str, path: str = "NOTES") -> None:
        (src / path).write_text(f"{subject}\n")
        git_in(src, "add", ".")
        git_in(src, "commit", "-qm", subject)

    for i in range(24):
        if i == 9:
            git_in(src, "checkout", "-q", "-b", "topic")  # from mainline commit 8
            for t in range(6):
                if t == 3 and not evil:
                    work.write_text("#define WORK 2160000UL\n")
                commit(f"topic {t}{' (more work)' if t == 3 and not evil else ''}", "TOPIC")
            git_in(src, "checkout", "-q", "main")
        if i == 14:
            git_in(src, "merge", "-q", "--no-ff", "--no-commit", "topic")
            if evil:
                work.write_text("#define WORK 2160000UL\n")
            git_in(src, "add", ".")
            git_in(src, "commit", "-qm", "Merge branch 'topic'")
            continue
        commit(f"change {i}")
    log = git_in(src, "log", "--all", "--format=%H %s")
    return {subject: sha for sha, subject in (line.split(" ", 1) for line in log.splitlines())}


@pytest.mark.parametrize("evil", [False, True], ids=["topic-commit", "evil-merge"])
def test_a_merge_culprit_is_followed_into_the_branch_it_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               evil: bool) -> None:
    """The first-parent bisection names the merge; a second bisection over the branch it
    brought in (fork..topic tip) names the topic's commit. When the branch alone shows no
    change (the merge commit itself adds the work), the answer is the merge, saying why."""
    make_project(tmp_path, monkeypatch, "1")
    shutil.rmtree(tmp_path / "src")
    commits = merged_history(tmp_path / "src", evil)
    (tmp_path / "tracker.yaml").write_text(
        TRACKER.read_text().replace("  every: 8 ", "  every: 4 ").replace("since: HEAD~40", "since: HEAD~16"))
    done = track_run(tmp_path)
    assert done.returncode == 0, done.stderr
    [regression] = [r for r in json.loads(perfline(tmp_path, "regressions", "--json").stdout)
                    if r["kind"] == "regression"]
    merge = commits["Merge branch 'topic'"]
    assert regression["status"] == "bisected", done.stderr[-3000:]
    culprit = merge if evil else commits["topic 3 (more work)"]
    assert regression["culprit"] == culprit, (regression, done.stderr[-3000:])
    fork, tip = commits["change 8"], commits["topic 5"]
    assert f"found merge {merge[:12]}: bisecting the branch it brought in, {fork[:12]}..{tip[:12]}" in done.stderr, \
        [line for line in done.stderr.splitlines() if "merge" in line]
    if evil:
        assert regression["note"].startswith(f"bisection 1: found, culprit {merge[:12]} Merge branch 'topic'; its "
                                             f"branch {fork[:12]}..{tip[:12]} alone shows no change (bisection 2)")
    else:
        assert regression["note"] == (f"bisection 1: found merge {merge[:12]} Merge branch 'topic'; into the branch "
                                      f"it merged ({fork[:12]}..{tip[:12]}), bisection 2: found, culprit "
                                      f"{culprit[:12]} topic 3 (more work)")
    # The dashboard's chart puts the culprit where it came into the branch: at its merge.
    from fastapi.testclient import TestClient

    from perfline.web.app import create_app
    from perfline.web.assets import vendor_dir
    from perfline.web.auth import Tokens

    store = Store.open(str(tmp_path / "db"))
    [tracker] = TestClient(create_app(store, Tokens({}), vendor_dir())).get("/api/trackers").json()
    [placed] = [c for mark in tracker["marks"] for c in mark["culprits"]]
    since = store.tracker("demo").since
    assert (placed["commit"], placed["position"]) == (culprit, int(git_in(tmp_path / "src", "rev-list",
                                                                          "--first-parent", "--count",
                                                                          f"{since}..{merge}")))
    graph = perfline(tmp_path, "track", "graph", "demo", "--png", str(tmp_path / "demo.png"))
    assert graph.returncode == 0, graph.stderr


def test_bisect_start_says_how_to_bisect_the_branch_of_a_merge_culprit(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`perfline bisect start` over the mainline names the merge, and prints the command
    that bisects the branch it brought in; that command names the topic's commit."""
    make_project(tmp_path, monkeypatch, "1")
    shutil.rmtree(tmp_path / "src")
    commits = merged_history(tmp_path / "src", evil=False)
    merge, fork, tip = commits["Merge branch 'topic'"], commits["change 8"], commits["topic 5"]
    args = ["--build", "make -s", "--command", "./bench", "--direction", "lower"]
    outer = perfline(tmp_path, "bisect", "start", "--repo", "src", "--good", commits["change 11"], "--bad",
                     commits["change 15"], *args)
    assert outer.returncode == 0, outer.stderr
    lines = outer.stdout.splitlines()
    said = lines.index(f"the culprit is a merge: the change came in with the branch it merged, {fork[:12]}.."
                       f"{tip[:12]}; bisect that with")
    command = shlex.split(lines[said + 1])
    assert command == ["perfline", "bisect", "start", "--good", fork, "--bad", tip, "--repo",
                       str((tmp_path / "src").resolve()), *args]
    inner = perfline(tmp_path, *command[1:], "--json")
    assert inner.returncode == 0, inner.stderr
    assert json.loads(inner.stdout)["culprit"] == commits["topic 3 (more work)"]
    with sqlite3.connect(tmp_path / "db") as connection:
        [(result,)] = connection.execute("SELECT result FROM bisections WHERE id = 1").fetchall()
    assert json.loads(result)["culprit"] == merge


@pytest.mark.parametrize(("text", "line", "message"), [
    ("narrow: sometimes\n", 1, "narrow must be true (regressions), all (improvements too) or false"),
    ("colour: blue\n", 1, "unknown key 'colour'"),
    ("select:\n  every: 0\n", 2, "select.every must be a whole number of at least 1"),
    ("jobs:\n  - missing.yaml\n", 2, "no such job file"),
    ("since: no-such-rev\n", 1, "since: 'no-such-rev' is neither a revision"),
    ("jobs:\n  - benchmark: command\n    params: {cmd: ./x}\n    repeat: 3\n", 2,
     "repeat 3: a tested commit is compared with the one before it, which needs 5 repetitions"),
])
def test_a_bad_tracker_file_is_one_error_line_and_runs_nothing(project: Path, text: str, line: int,
                                                               message: str) -> None:
    base = TRACKER.read_text()
    for key in ("select:\n  every: 8", "jobs:", "since: HEAD~40", "narrow: true"):
        if text.startswith(key.split(":")[0] + ":"):
            base = _drop_key(base, key.split(":")[0])
    (project / "tracker.yaml").write_text(text + base)
    proc = track_run(project)
    assert proc.returncode == 2
    [error] = proc.stderr.strip().splitlines()
    assert error.startswith("error: ") and f"tracker.yaml:{line}: " in error and message in error
    if (project / "db").exists():  # a file error is found before the store is opened
        with sqlite3.connect(project / "db") as connection:
            assert connection.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def _drop_key(text: str, key: str) -> str:
    """The tracker file without a top-level key and its indented block."""
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith(f"{key}:"):
            skipping = True
            continue
        if skipping and (line.startswith((" ", "\t")) or not line.strip()):
            continue
        skipping = False
        kept.append(line)
    return "".join(kept)


@pytest.mark.slow
def test_tracker_over_tags(project: Path) -> None:
    """select: tags: every tagged commit on the branch (here every 8th, v0.0 ... v0.7)."""
    commits = shas(project)
    for i, sha in enumerate(commits[::8]):
        subprocess.run(["git", "-C", str(project / "src"), "tag", f"v0.{i}", sha], check=True)
    subprocess.run(["git", "-C", str(project / "src"), "tag", "other", commits[3]], check=True)
    text = TRACKER.read_text().replace("  every: 8 ", "  tags: 'v0.*'").replace("since: HEAD~40", "since: v0.0")
    (project / "tracker.yaml").write_text(text)
    proc = track_run(project)
    assert proc.returncode == 0, proc.stderr
    assert set(runs_per_commit(project)) == set(commits[::8])
    [regression] = [r for r in json.loads(perfline(project, "regressions", "--json").stdout)
                    if r["kind"] == "regression"]
    assert (regression["good"], regression["bad"]) == (commits[40], commits[48])
    assert regression["culprit"] == commits[CULPRIT]


KALLSYMS_JOB = """\
benchmark: command
params:
  cmd: "echo $(( $(wc -l < /proc/kallsyms) * 100 + RANDOM % 100 ))"
  metric: symbols_x100
  direction: lower
target: qemu
kernel: placeholder
vm_cpus: 1
accel: tcg
repeat: 5
"""


@pytest.mark.vm
@pytest.mark.slow
def test_tracker_of_a_kernel_tree_boots_each_tested_build(debian_kernels: dict[str, Kernel], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`build: kernel: {config}` on the stand-in kernel tree of tests/test_kernel_bisect.py
    (Debian's real 6.1 images, then 6.12 from commit 5): each tested commit's bzImage is
    registered and booted in QEMU, and the regression (less memory left to user space)
    is narrowed to commit 5. The metric is the kernel's symbol count, a footprint that
    differs by far more than the 1% between-run variation a one-run commit is assumed to
    have (MemAvailable, which the kernel bisection test uses, moves 0.6%: too little for a
    tracker that runs each commit once); a random last digit gives it a little noise."""
    from test_kernel_bisect import kernel_tree

    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "cache"))
    old, new = debian_kernels["debian-6.1"], debian_kernels["debian-6.12"]
    commits = kernel_tree(tmp_path / "linux", [old.image if i < 5 else new.image for i in range(8)])
    kernels.add_image(new.image, "placeholder")
    (tmp_path / "job.yaml").write_text(KALLSYMS_JOB)
    (tmp_path / "my.config").write_text("CONFIG_X=y\n")
    (tmp_path / "tracker.yaml").write_text(
        f"name: kernel\nrepo: ./linux\nbranch: HEAD\nsince: {commits[0]}\nselect:\n  every: 4\n"
        "build:\n  kernel:\n    config: my.config\njobs:\n  - job.yaml\nnarrow: true\n")
    proc = track_run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    store = Store.open(str(tmp_path / "db"))
    tested = {store.get_run(i).info.kernel_commit: store.get_run(i) for i in store.find_runs(label="kernel")
              if not store.get_run(i).settings.get("interleaved")}
    assert set(tested) == {commits[0], commits[4], commits[7]}
    for sha, run in tested.items():
        assert run.settings["vm_kernel"] == f"track-kernel-{sha[:12]}"
        assert run.fingerprint["kernel_release"] == (old if sha != commits[7] else new).release
    [regression] = [r for r in store.regressions(tracker="kernel") if r.kind == "regression"]
    assert (regression.good, regression.bad) == (commits[4], commits[7])
    assert regression.status == "bisected" and regression.culprit == commits[5]


def test_a_repository_url_is_cloned_then_fetched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`repo:` a URL: cloned under perfline's cache on the first pass; a commit pushed
    later is fetched and tested on the next one (`every: 1`, three commits)."""
    monkeypatch.setenv("PERFLINE_CACHE_DIR", str(tmp_path / "cache"))
    subprocess.run([str(MAKE_REPO), str(tmp_path / "upstream"), "2", "99"], check=True)
    text = TRACKER.read_text().replace("./src", f"file://{tmp_path / 'upstream'}").replace(
        "  every: 8 ", "  every: 1 ").replace("since: HEAD~40", "since: HEAD~1")
    (tmp_path / "tracker.yaml").write_text(text)
    first = track_run(tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("fetching ") == 1  # by the check before the pass, not again by the pass
    assert (tmp_path / "cache" / "track" / "demo" / "repo" / ".git").is_dir()
    upstream = tmp_path / "upstream"
    (upstream / "NOTES").write_text("pushed later\n")
    subprocess.run(["git", "-C", str(upstream), "-c", "user.name=Dev", "-c", "user.email=dev@example.org",
                    "commit", "-qam", "pushed later"], check=True)
    second = track_run(tmp_path)
    assert second.returncode == 0, second.stderr
    head = subprocess.run(["git", "-C", str(upstream), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert len(runs_per_commit(tmp_path)) == 3 and runs_per_commit(tmp_path)[head] == 1
