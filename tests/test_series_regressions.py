"""History and regressions over a real store: case matching, what a series leaves out,
confirm's refusals and reproductions, records that follow a moving change point, and
the graph of a long series."""

from __future__ import annotations

import json
import struct
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from test_cli import perfline
from test_history import CASE, THROUGHPUT, fill

from perfline.analysis import regressions as records
from perfline.analysis.series import Point, Series, build_series, matching_cases
from perfline.records.fingerprint import Fingerprint
from perfline.records.job import Case, VmSpec
from perfline.records.metric import Measurement
from perfline.report.series_view import MAX_TICK_LABELS, write_png
from perfline.stats.changepoint import ChangePoint
from perfline.store import Regression, RunInfo, Store
from perfline.targets import local
from perfline.targets.kernels import CACHE_ENV, Kernel


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "perfline.db"


def store_at(db: Path) -> Store:
    return Store.open(f"sqlite:///{db}")


def add_run(store: Store, case: Case, values: list[float], *, status: str = "completed",
            label: str | None = None, commit: str | None = None, settings: dict | None = None,
            fingerprint: Fingerprint | None = None) -> int:
    run_id = store.start_run(case, fingerprint or local.fingerprint(), pid=1, label=label, kernel_commit=commit)
    if settings:
        store.set_settings(run_id, settings)
    for rep, value in enumerate(values):
        store.add_samples(run_id, rep, [Measurement(THROUGHPUT, value)], "benchmark")
    store.finish_run(run_id, status)
    return run_id


def regression_between(store: Store, before: int, after: int, metric: str, case_key: str,
                       change_pct: float = -5.0, status: str = "new") -> Regression:
    at = store.get_run(after).info.started_at
    recorded, _ = store.record_regression(Regression(
        0, metric, store.get_run(after).info.benchmark, case_key, local.fingerprint().machine_id,
        before, after, "regression" if change_pct < 0 else "improvement", change_pct,
        (change_pct - 2, change_pct + 2), 3.0, "new", None, at, at,
    ))
    if status != "new":
        recorded = store.set_regression_status(recorded.id, status, None)
    return recorded


def run_count(store: Store) -> int:
    return len(store.list_runs(limit=10_000))


# -- 1. --case matches parts of a key ----------------------------------------------------


def test_case_option_matches_parts_of_the_stored_key(db: Path) -> None:
    store = store_at(db)
    for clients in (4, 8):
        case = replace(CASE, params={"clients": clients, "duration": 5})
        for _ in range(3):
            add_run(store, case, [100.0, 101.0, 99.0])
    out = perfline(db, "history", "tbench.throughput", "--case", "clients=4").stdout
    assert "clients=4,duration=5" in out and "clients=8" not in out
    assert "clients=4,duration=5" in perfline(db, "history", "tbench.throughput", "--case",
                                              "clients=4,duration=5").stdout  # the whole key
    both = perfline(db, "history", "tbench.throughput", "--case", "duration=5").stdout
    assert "clients=4,duration=5" in both and "clients=8,duration=5" in both  # two series
    bad = perfline(db, "history", "tbench.throughput", "--case", "clients=16", check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "clients=4,duration=5; clients=8,duration=5" in bad.stderr
    # A quoted value may hold a comma: it is one part, not two.
    keys = ['cmd="echo 1,2",direction=lower', "cmd=true,direction=lower"]
    assert matching_cases(keys, 'cmd="echo 1,2"') == [keys[0]]
    assert matching_cases(keys, "direction=lower") == sorted(keys)
    assert matching_cases(keys, "cmd=echo") == []


# -- 2. only completed, regular runs are points -------------------------------------------


def git_commits(repo: Path, n: int) -> list[str]:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commits = []
    for i in range(n):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                        "commit", "-q", "--allow-empty", "-m", f"c{i}"], check=True)
        commits.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"],
                                      capture_output=True, text=True, check=True).stdout.strip())
    return commits


def test_series_leave_out_failed_interleaved_and_probe_runs(db: Path, tmp_path: Path) -> None:
    store = store_at(db)
    rng = np.random.default_rng(5)

    def level(mean: float) -> list[float]:
        return list(mean * (1 + 0.01 * rng.standard_normal(5)))

    regular = []
    for i in range(30):
        regular.append(add_run(store, CASE, level(100.0)))
        if i % 6 == 2:
            add_run(store, CASE, level(60.0), status="failed")
            add_run(store, CASE, level(60.0)[:2], status="interrupted")
            add_run(store, CASE, level(140.0), settings={"interleaved": "B"}, label="confirm-1")
    commits = git_commits(tmp_path / "repo", 2)
    for i in range(8):  # a bisection's probes: good, bad, good, bad ... at two commits
        add_run(store, CASE, level(100.0 if i % 2 == 0 else 90.0), label="bisect-1", commit=commits[i % 2])

    [series] = build_series(store.metric_values(metric=THROUGHPUT.name))
    assert series.order == "time" and [p.runs[0].id for p in series.points] == regular
    assert json.loads(perfline(db, "detect", "--json").stdout) == []

    # In commit order a probe is a measurement at its commit, and stays.
    probe_store_db = tmp_path / "probes.db"
    probe_store = store_at(probe_store_db)
    ids = [add_run(probe_store, CASE, level(100.0 if i % 2 == 0 else 90.0), label="bisect-1",
                   commit=commits[i % 2]) for i in range(8)]
    add_run(probe_store, CASE, level(60.0), commit=commits[0], status="failed")
    [by_commit] = build_series(probe_store.metric_values(), tmp_path / "repo")
    assert by_commit.order == "commit"
    assert [{r.id for r in p.runs} for p in by_commit.points] == [set(ids[0::2]), set(ids[1::2])]


# -- 3. confirm ------------------------------------------------------------------------


def test_confirm_refuses_a_judged_record_before_running_anything(db: Path) -> None:
    store = store_at(db)
    ids = fill(store, [100.0, 95.0])
    regression = regression_between(store, ids[0], ids[1], THROUGHPUT.name, CASE.key, status="confirmed")
    before = run_count(store)
    proc = perfline(db, "regressions", "confirm", str(regression.id), check=False)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert f"regression {regression.id} is confirmed: only a new one can be confirmed" in proc.stderr
    assert run_count(store) == before
    store.set_regression_status(regression.id, "false-alarm", None)
    proc = perfline(db, "regressions", "confirm", str(regression.id), check=False)
    assert f"`perfline regressions mark {regression.id} new` reopens it" in proc.stderr
    assert run_count(store) == before


def test_confirm_refuses_runs_at_two_commits(db: Path) -> None:
    store = store_at(db)
    ids = fill(store, [100.0, 95.0], commits=["1111aaaa", "2222bbbb"])
    regression = regression_between(store, ids[0], ids[1], THROUGHPUT.name, CASE.key)
    before = run_count(store)
    proc = perfline(db, "regressions", "confirm", str(regression.id), check=False)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert "perfline bisect start --good 1111aaaa --bad 2222bbbb" in proc.stderr
    assert run_count(store) == before and store.get_regression(regression.id).status == "new"


MSGMNB = Path("/proc/sys/kernel/msgmnb")  # System V message queue size: harmless to move


@pytest.mark.skipif(not MSGMNB.exists(), reason="no kernel.msgmnb sysctl")
def test_confirm_reapplies_knobs_changed_outside_perfline(db: Path) -> None:
    """Two runs of one case, a sysctl changed by hand between them: the re-run sets each
    side's value again, so the change shows again and is confirmed."""
    original = MSGMNB.read_text().strip()
    halved = str(int(original) // 2)
    cmd = f"echo $(( $(cat {MSGMNB}) + $(od -An -N1 -tu1 /dev/urandom) % 16 ))"
    runs = []
    try:
        for value in (original, halved):
            MSGMNB.write_text(value)
            [run] = json.loads(perfline(db, "run", "command", "-p", f"cmd={cmd}", "--repeat", "5",
                                        "--warmup", "0", "--no-monitors", "--json").stdout)
            runs.append(run)
    finally:
        MSGMNB.write_text(original)
    store = store_at(db)
    for run, value in zip(runs, (original, halved), strict=True):
        # kernel.msgmnb is not among the knobs a fingerprint always reads: add it as if it were.
        fingerprint = replace(local.fingerprint(), sysctls={**run["fingerprint"]["sysctls"], "kernel.msgmnb": value})
        store.set_fingerprint(run["id"], fingerprint)
    regression = regression_between(store, runs[0]["id"], runs[1]["id"], "command.value", runs[0]["case"],
                                    change_pct=-50.0)
    out = perfline(db, "regressions", "confirm", str(regression.id), "--pairs", "5").stdout
    assert "confirmed" in out
    updated = store.get_regression(regression.id)
    assert updated.status == "confirmed"
    assert f"before sysctl kernel.msgmnb={original}; after sysctl kernel.msgmnb={halved}" in (updated.note or "")
    assert MSGMNB.read_text().strip() == original  # restored after the re-runs
    reruns = [r for r in store.list_runs(limit=10) if r.label == f"confirm-{regression.id}"]
    assert len(reruns) == 2
    assert sorted(store.get_run(r.id).tunables["sysctl"]["kernel.msgmnb"] for r in reruns) == sorted([original, halved])
    # The re-runs are not points of the case's series: it still has the two runs.
    [series] = build_series(store.metric_values(metric="command.value"))
    assert [p.runs[0].id for p in series.points] == [runs[0]["id"], runs[1]["id"]]


def test_confirm_names_a_vm_kernel_that_is_gone(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "empty-cache"))
    store = store_at(db)
    case = Case("rcu-gp", "rcu-gp", {"iterations": 2}, {}, 5, 0, (), "qemu", vm=VmSpec("gone-6.1"))
    guest = replace(local.fingerprint(), kernel_release="6.1.0-0-guest", target="qemu")
    ids = [add_run(store, case, [1.0, 1.1], fingerprint=guest,
                   settings={"vm_kernel": "gone-6.1", "vm_kernel_release": "6.1.0-0-guest", "vm_accel": "tcg"})
           for _ in range(2)]
    regression = regression_between(store, ids[0], ids[1], THROUGHPUT.name, case.key)
    proc = perfline(db, "regressions", "confirm", str(regression.id), check=False)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert f"run {ids[0]} booted kernel gone-6.1, which is no longer registered" in proc.stderr
    assert run_count(store) == 2


@pytest.mark.vm
def test_confirm_reruns_each_side_in_a_vm_with_its_kernel(
    db: Path, debian_kernels: dict[str, Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_qemu_target import TEST_CACHE

    monkeypatch.setenv(CACHE_ENV, str(TEST_CACHE))
    runs = []
    for name in ("debian-6.1", "debian-6.12"):
        [run] = json.loads(perfline(db, "run", "rcu-gp", "-p", "iterations=2", "--repeat", "2", "--warmup", "0",
                                    "--no-monitors", "--target", "qemu", "--kernel", name, "--accel", "tcg",
                                    "--json").stdout)
        assert run["status"] == "completed", run["error"]
        runs.append(run)
    store = store_at(db)
    regression = regression_between(store, runs[0]["id"], runs[1]["id"], "rcu-gp.ms_per_gp", runs[0]["case"])
    proc = perfline(db, "regressions", "confirm", str(regression.id), "--pairs", "5", check=False)
    updated = store.get_regression(regression.id)
    if proc.returncode == 0:
        assert updated.status in ("confirmed", "false-alarm")
        assert "in VMs with kernels debian-6.1 and debian-6.12" in (updated.note or "")
    else:  # 5 pairs of TCG guests may not decide either way: then nothing is judged
        assert proc.returncode == 1 and "is inconclusive" in proc.stderr, proc.stderr
        assert updated.status == "new"
    reruns = sorted((r for r in store.list_runs(limit=10) if r.label == f"confirm-{regression.id}"),
                    key=lambda r: r.id)
    assert [store.get_run(r.id).settings["vm_kernel"] for r in reruns] == ["debian-6.1", "debian-6.12"]


# -- 4. a record follows its change point --------------------------------------------------


def test_a_moved_change_point_updates_its_record(db: Path) -> None:
    store = store_at(db)
    ids = fill(store, [100.0] * 15 + [95.0] * 15)
    # Found earlier, on fewer points, two points before where all of them put it.
    early = regression_between(store, ids[12], ids[13], THROUGHPUT.name, CASE.key)
    far = regression_between(store, ids[6], ids[7], THROUGHPUT.name, CASE.key)  # 8 points away
    [found] = json.loads(perfline(db, "detect", "--json").stdout)
    assert found["id"] == early.id and found["new"] is False
    assert abs(ids.index(found["after_run"]) - 15) <= 1 and found["change_pct"] != early.change_pct
    assert store.get_regression(far.id).after_run_id == ids[7]  # out of the margin: untouched
    assert len(store.regressions()) == 2

    # A record already judged keeps its runs and numbers.
    store.set_regression_status(early.id, "confirmed", None)
    [series] = build_series(store.metric_values())
    moved = ChangePoint(found_index := ids.index(found["after_run"]) + 3, -4.0, (-6.0, -2.0), 9.0, 1e-9)
    kept, created = records.record(store, series, moved)
    assert (kept.id, created, kept.after_run_id, kept.change_pct) == (early.id, False, found["after_run"],
                                                                       found["change_pct"])
    # Two change points within the margin in one detection keep a record each.
    claimed = {early.id}
    second, created = records.record(store, series, replace(moved, index=found_index + 2), claimed)
    assert created and second.id not in (early.id, far.id)


# -- 5. the graph of a long series ---------------------------------------------------------


def test_png_of_a_3000_point_series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    points = []
    for i in range(3000):
        run = RunInfo(i + 1, "tbench", "tbench", CASE.key, "local", "6.1", "host", None, None, "completed",
                      3, 3, start + timedelta(hours=i), None)
        level = 100.0 if i < 2000 else 95.0
        points.append(Point((run,), tuple(level * (1 + 0.01 * rng.standard_normal(3)))))
    series = Series(THROUGHPUT, "tbench", CASE.key, "m", "host", points, "time")
    path = tmp_path / "long.png"
    write_png(series, [ChangePoint(2000, -5.0, (-5.2, -4.8), 40.0, 1e-40)], path)
    header = path.read_bytes()[:24]
    assert header[:4] == b"\x89PNG"
    width, height = struct.unpack(">II", header[16:24])
    assert width <= 20 * 120 + 1 and height < 1000

    from perfline.report import series_view as history

    captured: dict[str, list[str]] = {}
    real_save = history.save

    def keep(figure, where):  # noqa: ANN001, ANN202
        captured["labels"] = [t.get_text() for t in figure.axes[0].get_xticklabels()]
        real_save(figure, where)

    monkeypatch.setattr(history, "save", keep)
    write_png(series, [], tmp_path / "again.png")
    assert 0 < len(captured["labels"]) <= MAX_TICK_LABELS
    assert captured["labels"][0] == points[0].name
