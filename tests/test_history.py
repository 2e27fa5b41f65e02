"""Series, change points, regressions and graphs over a real store."""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from perfline.analysis import regressions as records
from perfline.analysis.series import build_series
from perfline.records.job import Case
from perfline.records.metric import Direction, Measurement, Metric
from perfline.store import Regression, Store
from perfline.targets import local
from test_cli import perfline

THROUGHPUT = Metric("tbench.throughput", "MB/s", Direction.HIGHER, "throughput")
CASE = Case("tbench", "tbench", {"clients": 2, "duration": 5}, {}, 5, 0, (), "local")


def fill(store: Store, levels: list[float], *, noise: float = 0.01, commits: list[str] | None = None,
         seed: int = 1) -> list[int]:
    """One run per level, five repetitions each, with `noise` relative Gaussian noise."""
    rng = np.random.default_rng(seed)
    fingerprint = local.fingerprint()
    ids = []
    for i, level in enumerate(levels):
        commit = commits[i] if commits else None
        run_id = store.start_run(CASE, fingerprint, pid=1, kernel_commit=commit)
        for rep in range(5):
            value = level * (1 + noise * rng.standard_normal())
            store.add_samples(run_id, rep, [Measurement(THROUGHPUT, value)], "benchmark")
        store.finish_run(run_id, "completed")
        ids.append(run_id)
    return ids


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "perfline.db"


def test_step_found_recorded_once_and_graphed(db: Path, tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{db}")
    ids = fill(store, [100.0] * 15 + [95.0] * 15)  # throughput 5% down: a regression
    [series] = build_series(store.metric_values(metric="tbench.throughput"))
    [change] = series.change_points()
    assert abs(change.index - 15) <= 1
    assert change.ci_pct[0] < -5 < change.ci_pct[1] or abs(change.change_pct + 5) < 1.5

    first = json.loads(perfline(db, "detect", "--json").stdout)
    [found] = first
    assert found["kind"] == "regression" and found["new"] is True
    assert found["after_run"] == ids[change.index] and found["status"] == "new"
    [again] = json.loads(perfline(db, "detect", "--json").stdout)
    assert again["id"] == found["id"] and again["new"] is False  # deduplicated

    png = tmp_path / "history.png"
    out = perfline(db, "history", "tbench.throughput", "--png", str(png)).stdout
    assert "regression" in out and str(png) in out
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"

    listed = json.loads(perfline(db, "regressions", "--status", "new", "--json").stdout)
    assert [r["id"] for r in listed] == [found["id"]]


def test_no_change_points_on_a_flat_series(db: Path) -> None:
    store = Store.open(f"sqlite:///{db}")
    fill(store, [100.0] * 40, noise=0.02)
    assert json.loads(perfline(db, "detect", "--json").stdout) == []


def test_status_transitions(db: Path) -> None:
    store = Store.open(f"sqlite:///{db}")
    ids = fill(store, [100.0] * 12 + [90.0] * 12)
    [series] = build_series(store.metric_values())
    regression, _ = records.record(store, series, series.change_points()[0])
    assert records.transition(store, regression.id, "confirmed").status == "confirmed"
    assert records.transition(store, regression.id, "bisected", "abc123 found").note == "abc123 found"
    with pytest.raises(records.TransitionError, match="can become fixed, not new"):
        records.transition(store, regression.id, "new")
    proc = perfline(db, "regressions", "mark", str(regression.id), "fixed", "--note", "fixed by def456")
    assert "fixed" in proc.stdout
    bad = perfline(db, "regressions", "mark", str(regression.id), "confirmed", check=False)
    assert bad.returncode == 2 and "can become new" in bad.stderr
    assert ids


def test_points_follow_commit_order_with_a_repo(db: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commits = []
    for i in range(6):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                        "commit", "-q", "--allow-empty", "-m", f"c{i}"], check=True)
        commits.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"],
                                      capture_output=True, text=True, check=True).stdout.strip())
    store = Store.open(f"sqlite:///{db}")
    shuffled = [commits[i] for i in (3, 0, 5, 1, 4, 2)]  # runs were not taken in commit order
    fill(store, [100.0 + commits.index(c) for c in shuffled], commits=shuffled, noise=0.0)
    [series] = build_series(store.metric_values(), repo)
    assert series.order == "commit"
    assert [p.runs[0].kernel_commit for p in series.points] == commits
    assert "by commit" in perfline(db, "history", "tbench.throughput", "--repo", str(repo)).stdout


def test_csv_contract(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    values = np.concatenate([100 + rng.normal(0, 1, 60), 110 + rng.normal(0, 1, 60)])
    path = tmp_path / "series.csv"
    path.write_text("day,label,value\n" + "".join(f"{i},x,{v}\n" for i, v in enumerate(values)))
    out = json.loads(perfline(tmp_path / "db", "detect", "--csv", str(path), "--column", "value", "--json").stdout)
    assert out["n"] == 120
    [change] = out["change_points"]
    assert set(change) == {"index", "change_pct", "ci_pct"}
    assert abs(change["index"] - 60) <= 2 and 8 < change["change_pct"] < 12
    # Without --column the first numeric column is used: "day", a straight line.
    assert json.loads(perfline(tmp_path / "db", "detect", "--csv", str(path), "--json").stdout)["n"] == 120
    path.write_text("day,value\n1,100\n2,oops\n")
    bad = perfline(tmp_path / "db", "detect", "--csv", str(path), "--column", "value", check=False)
    assert bad.returncode == 2 and f"{path}:3:" in bad.stderr and "oops" in bad.stderr


def test_confirm_reruns_both_sides(db: Path) -> None:
    """Two real runs of one configuration with a recorded "change" between them: the
    interleaved re-run finds none, so the record becomes a false alarm."""
    runs = [json.loads(perfline(db, "run", "command", "-p", "cmd=echo 100", "--repeat", "5",
                                "--warmup", "0", "--no-monitors", "--json").stdout)[0] for _ in range(2)]
    store = Store.open(f"sqlite:///{db}")
    regression, _ = store.record_regression(Regression(
        0, "command.value", "command", runs[0]["case"], runs[0]["fingerprint"]["machine_id"],
        runs[0]["id"], runs[1]["id"], "regression", 10.0, (5.0, 15.0), 4.0, "new", None,
        *(2 * [store.get_run(runs[1]["id"]).info.started_at]),
    ))
    out = perfline(db, "regressions", "confirm", str(regression.id), "--pairs", "5")
    assert "false-alarm" in out.stdout
    assert store.get_regression(regression.id).status == "false-alarm"


def test_confirm_refuses_another_kernel(db: Path) -> None:
    store = Store.open(f"sqlite:///{db}")
    fingerprint = local.fingerprint()
    before = store.start_run(CASE, replace(fingerprint, kernel_release="6.1.0-0-fake"), pid=1)
    after = store.start_run(CASE, fingerprint, pid=1)
    for run_id in (before, after):
        store.add_samples(run_id, 0, [Measurement(THROUGHPUT, 1.0)], "benchmark")
    regression, _ = store.record_regression(Regression(
        0, THROUGHPUT.name, "tbench", CASE.key, fingerprint.machine_id, before, after,
        "regression", -5.0, (-7.0, -3.0), 3.0, "new", None,
        *(2 * [store.get_run(after).info.started_at]),
    ))
    proc = perfline(db, "regressions", "confirm", str(regression.id), check=False)
    assert proc.returncode == 1 and "6.1.0-0-fake" in proc.stderr


def test_a_change_within_the_floor_is_shown_not_recorded(db: Path) -> None:
    """A real 0.4% step found with little noise: history shows it, detect does not make a
    record that `regressions confirm`, judging with the same 1% floor, could never confirm."""
    store = Store.open(f"sqlite:///{db}")
    fill(store, [100.0] * 15 + [100.4] * 15, noise=0.0005)
    [series] = build_series(store.metric_values(metric="tbench.throughput"))
    [change] = series.change_points()
    assert 0 < change.change_pct < 1
    proc = perfline(db, "detect", "--json")
    assert json.loads(proc.stdout) == [] and "1 change point(s) within ±1% not recorded" in proc.stderr
    [recorded] = json.loads(perfline(db, "detect", "--floor", "0.2", "--json").stdout)
    assert recorded["kind"] == "improvement"


def test_a_confirmation_cut_short_by_a_failed_repetition_is_continued_not_ended_nor_restarted(
        db: Path, tmp_path: Path) -> None:
    """A tracker's confirmation is one sequential test over its attempts. One that a
    failing repetition cut short has not had its pairs: the record stays new (a benchmark
    failing once in 50 runs ended real steps as false alarms, bench/track_chaos.py), and
    the next attempt goes on with its pairs, looking at the pairs counted over both: a
    test started again each time would give a record with no change a new chance at
    alpha on every attempt (bench/confirm_attempts.py)."""
    from rich.console import Console

    from perfline.analysis import sequential_confirmation
    from perfline.cli.progress import ProgressObserver
    from perfline.runner import RunContext
    from perfline.stats.sequential import SequentialPlan

    calls = tmp_path / "calls"
    script = tmp_path / "value.sh"
    # Deterministic values that differ by nothing; once armed, the 7th call fails, as a
    # flaky program does: after both warm-ups and two pairs (AB, BA), the third pair's A.
    armed = tmp_path / "armed"
    script.write_text(f'#!/bin/sh\nn=$(( $(cat {calls} 2>/dev/null || echo 0) + 1 )); echo $n > {calls}\n'
                      f'[ -e {armed} ] && [ $n -eq 7 ] && exit 3\necho $(( 100 + (n * 37) % 5 ))\n')
    script.chmod(0o755)
    runs = [json.loads(perfline(db, "run", "command", "-p", f"cmd={script}", "--repeat", "5", "--warmup", "0",
                                "--no-monitors", "--json").stdout)[0] for _ in range(2)]
    calls.write_text("0\n")
    armed.touch()
    store = Store.open(f"sqlite:///{db}")
    regression, _ = store.record_regression(Regression(
        0, "command.value", "command", runs[0]["case"], runs[0]["fingerprint"]["machine_id"],
        runs[0]["id"], runs[1]["id"], "regression", 10.0, (5.0, 15.0), 4.0, "new", None,
        *(2 * [store.get_run(runs[1]["id"]).info.started_at]),
    ))
    found = records.reproduction(store, regression, 20, local.fingerprint())
    plan = SequentialPlan.up_to(20, 0.01)
    with ProgressObserver(Console(file=io.StringIO()), [found.before, found.after]) as observer:
        ctx = RunContext(store=store, fingerprint=local.fingerprint, observer=observer)
        with pytest.raises(records.CannotConfirm, match="stopped after 2 pairs, 2 of the test's 20"):
            sequential_confirmation.confirm(store, regression, found, ctx, 20, plan)
        assert store.get_regression(regression.id).status == "new"
        armed.unlink()
        said: list[str] = []
        judged, comparison = sequential_confirmation.confirm(store, regression, found, ctx, 20, plan,
                                                             say=said.append)
    first, second = (store.find_runs(setting=("attempt", n), with_samples=False) for n in (1, 2))
    assert len(first) == len(second) == 2
    assert said == [f"regression {regression.id}: its confirmation goes on from 2 of its 20 pairs (1 attempt(s) "
                    f"before: runs {first[0]}, {first[1]})"]
    [row] = [r for r in comparison.rows if r.metric.name == "command.value"]
    again = store.get_run(second[0]).info.samples
    # The test ended at one of its looks counted over both attempts (6, 9, 14, 20), which
    # the second attempt's own pairs are not: it went on, it did not start again.
    assert row.base.n == 2 + again and row.base.n in plan.looks and again not in plan.looks
    assert judged.status == "false-alarm"
    assert f"runs {first[0]}, {first[1]}; {second[0]}, {second[1]}" in str(judged.note)
    # Reopened by hand: confirmed afresh, not judged again from the pairs that ended it.
    records.transition(store, regression.id, "new", "reopened")
    with ProgressObserver(Console(file=io.StringIO()), [found.before, found.after]) as observer:
        ctx = RunContext(store=store, fingerprint=local.fingerprint, observer=observer)
        _, comparison = sequential_confirmation.confirm(store, regression, found, ctx, 20, plan)
    [fresh] = [store.get_run(i).info for i in store.find_runs(setting=("confirms", regression.id))][:1]
    [row] = [r for r in comparison.rows if r.metric.name == "command.value"]
    assert row.base.n == fresh.samples and fresh.samples in plan.looks
