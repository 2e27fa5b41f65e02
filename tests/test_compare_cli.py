"""compare, ab and --repeat auto end to end, with real processes and a real store."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from test_cli import perfline

from perfline.analysis.comparison import Side, compare_sides, side_differences
from perfline.records.job import Case
from perfline.records.metric import Direction, Measurement, Metric
from perfline.store import Store
from perfline.targets import local

PY = sys.executable


def noisy(mean: float, cv: float) -> str:
    """A command printing one draw of N(mean, cv·mean): a benchmark with known noise."""
    return f"{PY} -c 'import random; print(random.gauss({mean}, {mean * cv}))'"


def test_repeat_auto_stops_early_on_quiet_data(tmp_path: Path) -> None:
    [run] = json.loads(
        perfline(
            tmp_path / "db", "run", "command", "-p", f"cmd={noisy(100, 0.001)}", "--repeat", "auto",
            "--precision", "1%", "--max-repeat", "20", "--warmup", "0", "--no-monitors", "--json",
        ).stdout
    )
    assert run["repetitions"] == 5  # the minimum: 0.1% noise is within 1% at once
    assert run["settings"]["precision_reached"] is True
    assert run["settings"]["ci_halfwidth_pct"] <= 1.0


def test_repeat_auto_stops_at_the_cap_on_noisy_data(tmp_path: Path) -> None:
    proc = perfline(
        tmp_path / "db", "run", "command", "-p", f"cmd={noisy(100, 0.3)}", "--repeat", "auto",
        "--precision", "0.5%", "--max-repeat", "7", "--warmup", "0", "--no-monitors", "--json",
    )
    [run] = json.loads(proc.stdout)
    assert run["repetitions"] == 7
    assert run["settings"]["precision_reached"] is False
    assert "reached max_repeat 7" in proc.stderr


def test_ab_interleaves_and_finds_a_ten_percent_change(tmp_path: Path) -> None:
    db = tmp_path / "db"
    result = json.loads(
        perfline(
            db, "ab", "command", "-p", "direction=higher", "--a", f"param:cmd={noisy(100, 0.01)}",
            "--b", f"param:cmd={noisy(110, 0.01)}", "--pairs", "8", "--warmup", "0",
            "--no-monitors", "--json",
        ).stdout
    )
    [case] = result["cases"]
    [metric] = case["metrics"]
    [other] = metric["others"]
    assert 5 < other["change_pct"] < 15
    assert other["ci_pct"][0] < other["change_pct"] < other["ci_pct"][1]
    assert other["significant"] is True and other["verdict"] == "improvement"
    assert {"change_pct", "ci_pct", "p_value", "significant"} <= other.keys()
    run_a, run_b = (side["runs"][0] for side in case["sides"])
    # AB BA AB BA: pairs back to back, which side goes first alternating (ABBA).
    with sqlite3.connect(db) as connection:
        order = connection.execute(
            "SELECT run_id FROM samples WHERE source='benchmark' ORDER BY taken_at, id"
        ).fetchall()
    assert [r for (r,) in order] == [run_a, run_b, run_b, run_a] * 4


def test_compare_runs_and_labels(tmp_path: Path) -> None:
    db = tmp_path / "db"
    common = ["--repeat", "6", "--warmup", "0", "--no-monitors", "--json", "-p", "direction=lower"]
    ids = []
    for label, mean in (("v1", 100), ("v2", 100), ("v3", 120)):
        [run] = json.loads(
            perfline(db, "run", "command", "-p", f"cmd={noisy(mean, 0.01)}", "--label", label,
                     *common).stdout
        )
        ids.append(run["id"])
    # Different commands are different cases: compare by run id across them.
    out = json.loads(perfline(db, "compare", *map(str, ids), "--json").stdout)
    # The JSON schema is an API for other tools: changing it must be deliberate.
    assert set(out) == {"alpha", "cases"}
    [case] = out["cases"]
    assert set(case) == {"benchmark", "case", "sides", "cross_machine", "metrics",
                         "differences", "profile_shifts", "chain_shifts", "notes"}
    [metric] = case["metrics"]
    assert set(metric) == {"metric", "unit", "direction", "source", "base", "others"}
    assert set(metric["others"][0]) == {
        "mean", "stddev", "cv_pct", "n", "min", "median", "max", "change_pct", "ci_pct",
        "p_value", "p_value_rank", "significant", "verdict", "outliers_base", "outliers_other",
        "floor_pct", "unit", "more_samples",
    }
    same, slower = metric["others"]
    assert abs(same["change_pct"]) < 5
    assert slower["verdict"] == "regression" and slower["significant"] is True
    assert any(d["key"] == "param cmd" for d in case["differences"][1])
    assert case["cross_machine"] is False

    text = perfline(db, "compare", str(ids[0]), str(ids[2])).stdout
    assert "regression" in text and "%change" in text and "param cmd" in text

    missing = perfline(db, "compare", "--label", "v1", "--label", "v3", check=False)
    assert missing.returncode == 2 and "no case has runs" in missing.stderr


def test_compare_kernels_pools_each_kernels_runs_per_case(tmp_path: Path) -> None:
    """`compare --kernel A --kernel B` on stored runs as the qemu target records them:
    the kernel's name in the settings, the guest's release in the fingerprint."""
    store = Store.open(f"sqlite:///{tmp_path / 'db'}")
    metric = Metric("command.value", "", Direction.LOWER)
    case = Case("j", "command", {"cmd": "true"}, {}, 5, 0, (), "qemu")
    other_case = replace(case, params={"cmd": "false"})
    fingerprint = local.fingerprint()
    runs: dict[str, list[int]] = {}
    for kernel, level, on in (("debian-6.1", 100.0, case), ("debian-6.1", 100.0, case),
                              ("debian-6.12", 110.0, case), ("debian-6.1", 1.0, other_case)):
        run_id = store.start_run(on, replace(fingerprint, kernel_release=f"{kernel}.0-cloud"), pid=1)
        store.set_settings(run_id, {"vm_kernel": kernel, "vm_accel": "tcg"})
        for rep in range(5):
            store.add_samples(run_id, rep, [Measurement(metric, level + rep * 0.1)], "benchmark")
        runs.setdefault(kernel, []).append(run_id)
    store.start_run(case, fingerprint, pid=1)  # a local run: no kernel of its own
    db = tmp_path / "db"

    out = json.loads(perfline(db, "compare", "--kernel", "debian-6.1", "--kernel", "debian-6.12", "--json").stdout)
    [compared] = out["cases"]  # the case only 6.1 ran is left out
    assert compared["sides"] == [{"name": "debian-6.1", "runs": runs["debian-6.1"][:2]},
                                 {"name": "debian-6.12", "runs": runs["debian-6.12"]}]
    [row] = compared["metrics"]
    assert row["base"]["n"] == 10 and row["others"][0]["verdict"] == "regression"
    assert {"kernel_release", "setting vm_kernel"} <= {d["key"] for d in compared["differences"][0]}

    for args, message in (
        (["--kernel", "debian-6.1", "--kernel", "debian-6.2"],
         "no run booted kernel 'debian-6.2'; kernels with runs: debian-6.1, debian-6.12"),
        (["--kernel", "debian-6.1"], "compare needs at least two --kernel options"),
        (["--kernel", "debian-6.1", "--label", "v1"], "or --kernel twice or more"),
    ):
        proc = perfline(db, "compare", *args, check=False)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_fingerprint_diff_lists_a_changed_sysctl(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'db'}")
    metric = Metric("command.value", "", Direction.LOWER)
    case = Case("j", "command", {"cmd": "true"}, {}, 1, 0, (), "local")
    fingerprint = local.fingerprint()
    changed = replace(
        fingerprint, sysctls={**fingerprint.sysctls, "kernel.sched_autogroup_enabled": "42"}
    )
    sides = []
    for fp in (fingerprint, changed):
        run_id = store.start_run(case, fp, pid=1)
        store.add_samples(run_id, 0, [Measurement(metric, 1.0)], "benchmark")
        sides.append(Side(str(run_id), [store.get_run(run_id)]))
    diffs = side_differences(sides[0], sides[1], store)
    [diff] = [d for d in diffs if d.key == "sysctl kernel.sched_autogroup_enabled"]
    assert diff.other == "42" and diff.kind == "setting"
    assert not any(d.kind == "machine" for d in diffs)


def test_comparison_across_machines_says_so(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'db'}")
    metric = Metric("command.value", "", Direction.LOWER)
    case = Case("j", "command", {"cmd": "true"}, {}, 5, 0, (), "local")
    fingerprint = local.fingerprint()
    elsewhere = replace(fingerprint, hostname="other-box", cpu_model="Some Other CPU")
    sides = []
    for fp, level in ((fingerprint, 100.0), (elsewhere, 90.0)):
        run_id = store.start_run(case, fp, pid=1)
        for rep in range(5):
            store.add_samples(run_id, rep, [Measurement(metric, level + rep * 0.1)], "benchmark")
        sides.append(Side(str(run_id), [store.get_run(run_id)]))
    comparison = compare_sides(sides, store)
    assert comparison.cross_machine
    assert {d.key for d in comparison.differences[0] if d.kind == "machine"} == {
        "hostname", "cpu_model"
    }


def test_compare_csv_files_like_stored_runs(tmp_path: Path) -> None:
    """ministat for perfline: one file a side, a `run` column groups rows into runs, the
    JSON document has compare --json's shape."""
    rng = np.random.default_rng(4)
    for name, level in (("before.csv", 100.0), ("after.csv", 104.0)):
        lines = ["run,seconds,other"]
        for run in range(4):
            offset = rng.normal(0, 0.3)
            lines += [f"r{run},{level + offset + rng.normal(0, 0.5):.3f},{rng.normal(5, 0.1):.3f}" for _ in range(5)]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    db = tmp_path / "db"
    out = json.loads(perfline(db, "compare", "--csv", str(tmp_path / "before.csv"), str(tmp_path / "after.csv"),
                              "--column", "seconds", "--json").stdout)
    [case] = out["cases"]
    assert set(case) == {"benchmark", "case", "sides", "cross_machine", "metrics", "differences",
                         "profile_shifts", "chain_shifts", "notes"}
    [metric] = case["metrics"]
    [after] = metric["others"]
    assert metric["metric"] == "seconds" and after["unit"] == "runs" and after["n"] == 20
    assert after["verdict"] == "regression" and after["ci_pct"][0] < after["change_pct"] < after["ci_pct"][1]
    both = json.loads(perfline(db, "compare", "--csv", str(tmp_path / "before.csv"), str(tmp_path / "after.csv"),
                               "--direction", "higher", "--json").stdout)
    assert [m["metric"] for m in both["cases"][0]["metrics"]] == ["seconds", "other"]
    assert both["cases"][0]["metrics"][0]["others"][0]["verdict"] == "improvement"
    assert not db.exists()  # files are compared without a store


def test_compare_csv_columns_are_one_family_unless_primary(tmp_path: Path) -> None:
    """Without --primary every column is judged in one Benjamini–Hochberg family at α/2;
    --primary keeps the headline at α and says so; a --primary that is not a compared
    column is a one-line error."""
    rng = np.random.default_rng(5)
    for name, level in (("before.csv", 100.0), ("after.csv", 106.0)):
        rows = ["seconds,c1,c2"] + [f"{level * rng.lognormal(0, 0.02):.3f},{rng.normal(5, 0.1):.3f},"
                                    f"{rng.normal(7, 0.1):.3f}" for _ in range(12)]
        (tmp_path / name).write_text("\n".join(rows) + "\n")
    files = [str(tmp_path / "before.csv"), str(tmp_path / "after.csv")]
    family = json.loads(perfline(tmp_path / "db", "compare", "--csv", *files, "--json").stdout)["cases"][0]
    assert any("seconds, c1, c2: judged as one family (Benjamini–Hochberg at α=0.005)" in n for n in family["notes"])
    assert family["metrics"][0]["others"][0]["verdict"] == "regression"
    headline = json.loads(perfline(tmp_path / "db", "compare", "--csv", *files, "--primary", "seconds",
                                   "--json").stdout)["cases"][0]
    assert any(n.startswith("c1, c2: judged as one family (Benjamini–Hochberg at α=0.005); the headline seconds "
                            "each at α=0.01") for n in headline["notes"])
    assert headline["metrics"][0]["others"][0]["verdict"] == "regression"
    bad = perfline(tmp_path / "db", "compare", "--csv", *files, "--primary", "minutes", check=False)
    assert bad.returncode == 2
    [line] = bad.stderr.strip().splitlines()
    assert line.startswith("error: ") and "before.csv:1: --primary minutes: not among the compared columns" in line


@pytest.mark.parametrize(("content", "message"), [
    ("run,seconds\nr1,1.0\nr1,oops\n", "bad.csv:3: 'seconds' is 'oops', not a number"),
    ("seconds\n", "bad.csv:1: expected a header line"),
    ("run,minutes\nr1,1.0\n", "bad.csv:1: no column 'seconds'"),
])
def test_compare_csv_bad_file_is_one_line(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "good.csv").write_text("run,seconds\nr1,1.0\nr1,1.1\n")
    (tmp_path / "bad.csv").write_text(content)
    proc = perfline(tmp_path / "db", "compare", "--csv", str(tmp_path / "good.csv"), str(tmp_path / "bad.csv"),
                    check=False)
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line


def test_compare_loads_neither_scipy_stats_nor_alembic(tmp_path: Path) -> None:
    """Start-up of `perfline compare` (bench/store_scale.py): scipy.stats takes 0.85 s to
    import, alembic with the PostgreSQL dialect 0.12 s; a comparison of untied samples
    and an up-to-date SQLite store need neither."""
    url = f"sqlite:///{tmp_path / 'db'}"
    Store.open(url).close()
    code = """
import sys
import numpy as np
from perfline.cli.app import app
from perfline.records.metric import Direction, Metric
from perfline.stats.two_sample import compare
from perfline.store import Store
Store.open(sys.argv[1])
rng = np.random.default_rng(1)
compare(rng.lognormal(0, 0.02, 30), rng.lognormal(0, 0.02, 30), Metric("m", "s", Direction.LOWER))
compare(rng.lognormal(0, 0.02, 5), rng.lognormal(0, 0.02, 5), Metric("m", "s", Direction.LOWER))
print(sorted(m for m in ("scipy.stats", "alembic", "sqlalchemy.dialects.postgresql") if m in sys.modules))
"""
    out = subprocess.run([PY, "-c", code, url], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
