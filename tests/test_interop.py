"""`perfline import` / `perfline export` on other tools' real files (tests/data/interop,
copied from ../shared/data/interop with their sources and licences in SOURCES.md).

Spot checks are computed from the files by hand (the values below are read off them),
not by the importers' own code."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from perfline.interop.importing import plan
from perfline.interop.model import ImportFailed
from perfline.interop.otava import OtavaColumns

DATA = Path(__file__).parent / "data" / "interop"
# criterion/Fibonacci2/Iterative/20/new/sample.json: the first sample, 208873 iterations in 1166000 ns.
FIRST_CRITERION_TIME_NS = 1166000.0


def perfline(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfline", "--db", str(db), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def imported(db: Path, path: Path, *args: str) -> dict[str, object]:
    proc = perfline(db, "import", str(path), "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def values(db: Path, run: int, metric: str) -> list[float]:
    with sqlite3.connect(db) as con:
        return [v for (v,) in con.execute("SELECT value FROM samples WHERE run_id = ? AND metric = ? ORDER BY "
                                          "repetition", (run, metric))]


def direction(db: Path, metric: str) -> tuple[str, str]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT unit, direction FROM metrics WHERE name = ?", (metric,)).fetchone()


def test_hyperfine_times_are_the_samples(tmp_path: Path) -> None:
    db = tmp_path / "db"
    doc = imported(db, DATA / "hyperfine" / "bencher_two.json")
    assert doc["format"] == "hyperfine" and len(doc["runs"]) == 2  # 'sleep 0.1' and 'sleep 0.2'
    first = values(db, doc["runs"][0], "hyperfine.wall_time")
    assert len(first) == 27 and first[:2] == [0.10586876872, 0.10725897672000001]
    assert direction(db, "hyperfine.wall_time") == ("s", "lower")


def test_gbench_times_in_seconds_and_aggregates_left_out(tmp_path: Path) -> None:
    db = tmp_path / "db"
    doc = imported(db, DATA / "gbench" / "benchzoo_google_benchmark.json")
    assert values(db, doc["runs"][0], "gbench.real_time") == [pytest.approx(2.150127433999998)]
    assert values(db, doc["runs"][0], "gbench.cpu_time") == [pytest.approx(0.04253400000000032e-3)]
    mixed = imported(db, DATA / "gbench" / "koniksedy_offset_list.json")  # us and ms in one file
    with sqlite3.connect(db) as con:
        [(run,)] = con.execute("SELECT id FROM runs WHERE params LIKE '%FilterPoly/Degree0/FullScan%'").fetchall()
    assert run in mixed["runs"] and values(db, run, "gbench.real_time") == [pytest.approx(584.0788040000007e-3)]
    assert direction(db, "gbench.items_per_second") == ("/s", "higher")
    fixture = imported(db, DATA / "gbench" / "gbench_Inputs_test1_run1.json")
    with sqlite3.connect(db) as con:
        names = {json.loads(p)["name"] for (p,) in con.execute(
            f"SELECT params FROM runs WHERE id IN ({','.join(map(str, fixture['runs']))})")}
    assert not any(name.endswith(("_BigO", "_RMS")) for name in names) and "BM_SameTimes" in names


def test_pytest_benchmark_raw_data_or_a_flagged_summary(tmp_path: Path) -> None:
    db = tmp_path / "db"
    doc = imported(db, DATA / "pytest-benchmark" / "pb_v3.2.2_several_units.json")
    assert doc["skipped"] == 3  # three data arrays end in a string, not a number
    sleep = values(db, doc["runs"][3], "pytest-benchmark.time")
    assert sleep[-1] == 2.001044877
    old = imported(db, DATA / "pytest-benchmark" / "pb_v2.5.0_0001.json")
    [run] = old["runs"]
    assert values(db, run, "pytest-benchmark.time") == [2.622408132654948e-07]
    with sqlite3.connect(db) as con:
        [(settings,)] = con.execute("SELECT settings FROM runs WHERE id = ?", (run,)).fetchall()
    summary = json.loads(settings)["summary_only"]["pytest-benchmark.time"]
    assert summary["n"] == 9987 and summary["mean"] == 2.622408132654948e-07


def test_bmf_lkp_and_otava(tmp_path: Path) -> None:
    db = tmp_path / "db"
    dhat = imported(db, DATA / "bmf" / "report_dhat.json")
    assert values(db, dhat["runs"][0], "bmf.Total Bytes") == [662.0]
    stats = imported(db, DATA / "lkp" / "stats_0.json")
    assert values(db, stats["runs"][0], "mpstat.cpu.all.sys%") == [0.037]
    matrix = imported(db, DATA / "lkp" / "matrix_0.json")
    assert len(values(db, matrix["runs"][0], "perf-stat.i.cpu-cycles")) == 34  # arrays of different lengths
    assert len(values(db, matrix["runs"][0], "mpstat.cpu.all.usr%")) == 36
    assert values(db, matrix["runs"][0], "mpstat.time") == []  # timestamps are not metrics
    otava = imported(db, DATA / "otava" / "sample.csv")  # the commit column is taken by default
    assert len(otava["runs"]) == 10 and values(db, otava["runs"][0], "otava.metric1") == [154023.0]
    with sqlite3.connect(db) as con:
        commit, started = con.execute("SELECT kernel_commit, started_at FROM runs WHERE id = ?",
                                      (otava["runs"][0],)).fetchone()
    assert commit == "aaa0" and started.startswith("2024-01-01 02:00:00")  # 3:00 at +0100
    assert len(imported(db, DATA / "otava" / "sample-unix-time.csv")["runs"]) == 10


def test_otava_attribute_columns_split_the_series(tmp_path: Path) -> None:
    """attributes.csv: `branch` is not a number, so it is an attribute: each run keeps it
    as a parameter and each branch is a series of its own; the empty cell is skipped."""
    db = tmp_path / "db"
    doc = imported(db, DATA / "otava" / "attributes.csv")
    assert len(doc["runs"]) == 10 and doc["samples"] == 19 and doc["skipped"] == 1
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT params, case_key, kernel_commit FROM runs ORDER BY id").fetchall()
    assert [json.loads(p)["branch"] for p, _, _ in rows] == ["main", "stable"] * 5
    assert {k for _, k, _ in rows} == {"branch=main,file=attributes", "branch=stable,file=attributes"}
    assert [c for _, _, c in rows][:2] == ["aaa0", "bbb0"]
    for branch, first in (("main", "154023"), ("stable", "138455")):
        history = perfline(db, "history", "otava.metric1", "--case", f"branch={branch}")
        assert history.returncode == 0, history.stderr
        assert f"branch={branch}" in history.stdout and first in history.stdout.replace(",", "")
    assert values(db, doc["runs"][5], "otava.metric2") == []  # the empty cell
    # --metrics leaves metric2 out; --attributes commit is Otava's way of naming the commit.
    chosen = imported(tmp_path / "chosen", DATA / "otava" / "attributes.csv", "--metrics", "metric1",
                      "--attributes", "commit,branch")
    assert chosen["samples"] == 10
    with sqlite3.connect(tmp_path / "chosen") as con:
        assert {m for (m,) in con.execute("SELECT DISTINCT metric FROM samples")} == {"otava.metric1"}
        assert {k for (k,) in con.execute("SELECT case_key FROM runs")} == {"branch=main,file=attributes",
                                                                            "branch=stable,file=attributes"}
    # --attributes metric2: a number read as an attribute (a build number, say).
    as_attribute = imported(tmp_path / "build", DATA / "otava" / "attributes.csv", "--attributes", "metric2")
    assert as_attribute["samples"] == 10
    with sqlite3.connect(tmp_path / "build") as con:
        assert json.loads(con.execute("SELECT params FROM runs ORDER BY id").fetchone()[0]) == {
            "file": "attributes", "metric2": "10.43"}


@pytest.mark.parametrize(("columns", "message"), [
    (OtavaColumns(metrics=("branch",)), ("'branch' is 'main', not a number (--attributes branch reads the column as "
                                         "an attribute)")),
    (OtavaColumns(metrics=("metric3",)), ("--metrics names 'metric3', not a column (the header has time, commit, "
                                          "branch, metric1, metric2)")),
    (OtavaColumns(metrics=("metric1",), attributes=("metric1",)), "metric1: given to both --metrics and --attributes"),
    (OtavaColumns(attributes=("time",)), "--attributes names 'time': the time column is each run's time"),
])
def test_otava_columns_given_wrongly_are_refused(columns: OtavaColumns, message: str) -> None:
    with pytest.raises(ImportFailed) as caught:
        plan(DATA / "otava" / "attributes.csv", None, label=None, machine=None, commit=None, commit_from_file=True,
             directions={}, columns=columns)
    assert caught.value.message == message


def test_otava_columns_on_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "db"
    proc = perfline(db, "import", str(DATA / "otava" / "attributes.csv"), "--metrics", "metric1,branch")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line == (f"error: {DATA / 'otava' / 'attributes.csv'}:2: 'branch' is 'main', not a number "
                    "(--attributes branch reads the column as an attribute)")
    assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    other = perfline(db, "import", str(DATA / "bmf" / "report_latency.json"), "--attributes", "x")
    assert other.returncode == 2 and "--metrics and --attributes name an Otava CSV's columns; this is bmf" in other.stderr


def test_a_file_imported_before_is_refused_unless_forced(tmp_path: Path) -> None:
    db = tmp_path / "db"
    first = imported(db, DATA / "bmf" / "report_latency.json")
    again = perfline(db, "import", str(DATA / "bmf" / "report_latency.json"))
    assert again.returncode == 2 and "imported before" in again.stderr and "--force" in again.stderr
    forced = imported(db, DATA / "bmf" / "report_latency.json", "--force")
    assert len(forced["runs"]) == len(first["runs"]) == 3
    dry = imported(tmp_path / "other", DATA / "hyperfine" / "bencher_two.json", "--dry-run")
    assert dry["runs"] == [] and dry["samples"] == 27 + 13 + 4


def test_export_import_export_is_byte_identical(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for path in (DATA / "hyperfine" / "bencher_two.json", DATA / "otava" / "sample.csv"):
        imported(a, path)
    assert perfline(a, "run", "command", "-p", "cmd=echo 3", "--repeat", "5", "--warmup", "0", "--no-monitors",
                    "--label", "measured").returncode == 0
    first = perfline(a, "export").stdout
    (tmp_path / "export.json").write_text(first)
    imported(b, tmp_path / "export.json")
    assert perfline(b, "export").stdout == first
    csv = perfline(a, "export", "--format", "csv", "--label", "measured").stdout.splitlines()
    assert csv[0] == "run,label,benchmark,case,metric,unit,direction,repetition,value,commit,started_at"
    assert len(csv) == 6 and csv[1].split(",")[1] == "measured"


@pytest.mark.parametrize(("content", "message"), [
    ('{"results": [{"command": "x", "times": [1, 2', "not valid JSON"),
    ('{"results": [{"command": "x", "times": "fast"}]}', "results[0].times: expected list"),
    ("<html>not a result</html>", "not valid JSON"),
    ('{"something": "else"}', "not a format perfline imports"),
])
def test_bad_input_is_one_error_line_and_stores_nothing(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    db = tmp_path / "db"
    proc = perfline(db, "import", str(bad))
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {bad}") and message in line
    assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_a_huge_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(2 * 2**30)  # sparse: 2 GB that take no disk
    with pytest.raises(ImportFailed, match="larger than any result file"):
        plan(huge, "hyperfine", label=None, machine=None, commit=None, commit_from_file=False, directions={})


FUZZ_FILES = [p for p in DATA.rglob("*") if p.suffix in (".json", ".csv")]


@pytest.mark.parametrize("source", FUZZ_FILES, ids=lambda p: p.name)
def test_fuzzed_files_fail_cleanly(source: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Mutations of every shared file (bytes flipped, cut, fields swapped): the importer
    either reads it or raises ImportFailed; never another exception. 200 mutations a file
    here, 10,000 in the slow suite (PERFLINE_FUZZ)."""
    import os

    count = int(os.environ.get("PERFLINE_FUZZ", "200"))
    rng = random.Random(source.name)
    original = source.read_bytes()
    target = tmp_path / source.name
    for _ in range(count):
        data = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            i = rng.randrange(len(data)) if data else 0
            if kind < 0.4 and data:
                data[i] = rng.randrange(256)
            elif kind < 0.6:
                data = data[: rng.randrange(len(data) + 1)]
            elif kind < 0.8 and data:
                data.insert(i, rng.choice(b'"{}[],:0-.eNaI\\\n'))
            else:
                data[i:i] = rng.choice([b"NaN", b"-Infinity", b"null", b'"x"', b"[]", b"{}", b"1e999"])
        target.write_bytes(bytes(data))
        try:
            plan(target, None, label=None, machine=None, commit=None, commit_from_file=False, directions={})
        except ImportFailed:
            pass


@pytest.mark.parametrize("source", [p for p in FUZZ_FILES if p.suffix == ".csv"], ids=lambda p: p.name)
def test_fuzzed_otava_files_with_chosen_columns_fail_cleanly(source: Path, tmp_path: Path) -> None:
    """The same mutations of every Otava CSV, each read with random --metrics and
    --attributes (the header's names, names it lacks, time and commit, empty lists):
    read, or ImportFailed; never another exception."""
    import os

    count = int(os.environ.get("PERFLINE_FUZZ", "200"))
    rng = random.Random(f"columns {source.name}")
    original = source.read_bytes()
    names = [*original.decode().splitlines()[0].split(","), "nope", ""]
    target = tmp_path / source.name
    for _ in range(count):
        data = bytearray(original)
        for _ in range(rng.randint(0, 3)):
            i = rng.randrange(len(data)) if data else 0
            kind = rng.random()
            if kind < 0.4 and data:
                data[i] = rng.randrange(256)
            elif kind < 0.6:
                data = data[: rng.randrange(len(data) + 1)]
            else:
                data[i:i] = rng.choice([b",", b"\n", b"x", b"NaN", b"inf", b"", b'"', b"1e999", b",,"])
        target.write_bytes(bytes(data))

        def pick() -> tuple[str, ...] | None:
            return None if rng.random() < 0.3 else tuple(rng.sample(names, rng.randint(0, 3)))

        columns = OtavaColumns(pick(), pick())
        try:
            found = plan(target, "otava", label=None, machine=None, commit=None, commit_from_file=True,
                         directions={}, columns=columns)
        except ImportFailed:
            continue
        for run in found.runs:
            assert all(value == value for _, _, _, value, _ in run.samples)  # no NaN stored


@pytest.mark.parametrize("where", ["", "Fibonacci2/Iterative/20", "Fibonacci2/Iterative/20/new"])
def test_criterion_samples_per_iteration_from_any_level_of_its_tree(tmp_path: Path, where: str) -> None:
    db = tmp_path / "db"
    doc = imported(db, DATA / "criterion" / where)
    assert doc["format"] == "criterion" and doc["samples"] == 100
    first = values(db, doc["runs"][0], "criterion.time")[0]
    assert first == pytest.approx(FIRST_CRITERION_TIME_NS / 208873.0 * 1e-9)  # times[0] / iters[0], in s
    with sqlite3.connect(db) as con:
        [(params,)] = con.execute("SELECT params FROM runs").fetchall()
    assert json.loads(params)["name"] == "Fibonacci2/Iterative/20"


def test_asv_results_v1_and_v2(tmp_path: Path) -> None:
    db = tmp_path / "db"
    v1 = imported(db, DATA / "asv" / "v1-asv-example")  # machine.json and benchmarks.json are not results
    assert v1["skipped"] == 2  # time_AAA_failure is null, time_AAA_skip NaN
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT r.params, s.value, r.kernel_commit, r.started_at, r.settings FROM runs r JOIN "
                           "samples s ON s.run_id = r.id WHERE s.metric = 'asv.time_other.time_parameterized' "
                           "ORDER BY s.value").fetchall()
    # {"params": [["1", "2", "3"]], "result": [1, 2, 3]}: three cases
    assert [(json.loads(p)["p0"], v) for p, v, *_ in rows] == [("1", 1.0), ("2", 2.0), ("3", 3.0)]
    assert rows[0][2] == "22b920c6d0d54112ccbc020eddba9ea7a2d204f3"
    assert rows[0][3].startswith("2013-09-11 12:22:56")  # "date": 1378902176000 (ms)
    assert "summary_only" in json.loads(rows[0][4])  # asv keeps one number per benchmark
    # benchmarks.json declares time_units.mem_unit a time benchmark in seconds, whatever its name says.
    assert direction(db, "asv.time_units.mem_unit") == ("s", "lower")
    v2 = imported(db, DATA / "asv" / "v2-metpy")
    assert len(v2["runs"]) == 58
    with sqlite3.connect(db) as con:
        [(value, settings)] = con.execute(
            "SELECT s.value, r.settings FROM runs r JOIN samples s ON s.run_id = r.id "
            "WHERE s.metric = 'asv.benchmarks.TimeSuite.time_cape_cin'").fetchall()
    assert value == 0.007670249993680045
    assert json.loads(settings)["summary_only"]["asv.benchmarks.TimeSuite.time_cape_cin"]["stats_q_75"] == 0.0098833


def test_pts_composite_xml(tmp_path: Path) -> None:
    """tests/data/interop/pts/composite.xml is written from the format (no licensed real
    file exists, see SOURCES.md): per-run values from RawString, HIB/LIB, systems as labels."""
    db = tmp_path / "db"
    doc = imported(db, DATA / "pts" / "composite.xml")
    assert len(doc["runs"]) == 5 and doc["samples"] == 3 + 3 + 1 + 2 + 2
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT r.label, r.params, group_concat(s.value, ':'), r.settings FROM runs r "
                           "JOIN samples s ON s.run_id = r.id GROUP BY r.id ORDER BY r.id").fetchall()
    label, params, raw, _ = rows[1]
    assert label == "linux-6.12" and json.loads(params)["test"] == "pts/hackbench-1.0.0" and raw == "23.094:23.251:23.198"
    # The result without an Identifier is named by its Title; an empty RawString leaves the Value, a summary.
    assert json.loads(rows[2][1])["test"] == "Timed Linux Kernel Compilation" and rows[2][2] == "58.2"
    assert "summary_only" in json.loads(rows[2][3])
    assert direction(db, "pts.value")[1] in ("lower", "higher")
    compared = json.loads(perfline(db, "compare", "--label", "linux-6.1", "--label", "linux-6.12", "--json").stdout)
    [hackbench] = [c for c in compared["cases"] if "hackbench" in c["case"]]
    assert hackbench["metrics"][0]["others"][0]["change_pct"] == pytest.approx((23.181 / 20.513 - 1) * 100, abs=0.05)


def test_an_xml_bomb_is_refused_before_parsing(tmp_path: Path) -> None:
    bomb = tmp_path / "composite.xml"
    bomb.write_text('<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
                    ' <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\n]>\n'
                    "<PhoronixTestSuite><Result><Title>&lol2;</Title></Result></PhoronixTestSuite>\n")
    proc = perfline(tmp_path / "db", "import", str(bomb))
    assert proc.returncode == 2 and f"{bomb}:2: a DOCTYPE or ENTITY declaration" in proc.stderr
