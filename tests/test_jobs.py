"""Job files: parsing, line-numbered errors with suggestions, matrix expansion."""

from __future__ import annotations

import os
from pathlib import Path
from textwrap import dedent

import pytest

import perfline.jobs.lookup as lookup_module
from perfline.benchmarks import BENCHMARKS, Benchmark, Param
from perfline.jobs import (
    MAX_CASES,
    Case,
    JobError,
    JobSpec,
    expand,
    job_from_benchmark,
    load_job,
    parse_param_args,
)
from perfline.monitors import DEFAULT_MONITORS
from perfline.plugins.registry import Registry
from perfline.records.metric import Direction, Metric

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "jobs"


class Toy(Benchmark):
    """A test-only benchmark with one parameter of every type."""

    name = "toy"
    summary = "test benchmark"
    params = (
        Param("clients", int, 1, "clients", minimum=1),
        Param("duration", float, 5, "seconds", minimum=0.1),
        Param("mode", str, "pipe", "mode", choices=("pipe", "socket")),
        Param("verbose", bool, False, "verbose"),
        Param("label", str, None, "optional label"),
    )
    metrics = (Metric("toy.ops", "ops/s", Direction.HIGHER),)

    def run_once(self):  # pragma: no cover - never run
        return []


class Bare(Toy):
    name = "bare"
    params = ()


@pytest.fixture(autouse=True)
def toy_benchmarks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The job parser sees `toy` and `bare` plus every real benchmark name."""
    real = {name: f"{__name__}:_Missing" for name in BENCHMARKS.names()}
    entries = {**real, "toy": f"{__name__}:Toy", "bare": f"{__name__}:Bare"}
    monkeypatch.setattr(lookup_module, "BENCHMARKS", Registry("benchmark", entries, group="perfline.benchmarks", base=Benchmark))


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(dedent(text).lstrip("\n"))
    return path


def error_of(tmp_path: Path, text: str) -> JobError:
    path = write(tmp_path, text)
    with pytest.raises(JobError) as info:
        load_job(path)
    err = info.value
    assert str(err).startswith(f"{path}:{err.line}: ") if err.line else True
    return err


# -- valid jobs ---------------------------------------------------------------------


def test_valid_job_parses(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        # a comment
        benchmark: toy
        params:
          clients: [1, 2, 4]
          duration: 5
          mode: socket
        repeat: 3
        warmup: 0
        monitors: [proc-stat, vmstat]
        tunables:
          sysctl: {kernel.sched_autogroup_enabled: [0, 1]}
          sysfs: {/sys/module/rcutree/parameters/jiffies_till_first_fqs: 1}
          governor: performance
          pin: "0-1"
        target: local
        """,
        name="tbench-clients.yaml",
    )
    job = load_job(path)
    assert job == JobSpec(
        name="tbench-clients",
        benchmark="toy",
        params={"clients": [1, 2, 4], "duration": 5.0, "mode": "socket"},
        repeat=3,
        warmup=0,
        monitors=("proc-stat", "vmstat"),
        tunables={
            "sysctl": {"kernel.sched_autogroup_enabled": [0, 1]},
            "sysfs": {"/sys/module/rcutree/parameters/jiffies_till_first_fqs": 1},
            "governor": {"governor": "performance"},
            "pin": {"pin": "0-1"},
        },
        target="local",
        path=path,
    )
    assert isinstance(job.params["duration"], float)
    cases = expand(job)
    assert len(cases) == 6
    first = cases[0]
    assert first.params == {
        "clients": 1,
        "duration": 5.0,
        "mode": "socket",
        "verbose": False,
    }
    assert first.governor == "performance" and first.pin == "0-1"
    assert first.key == (
        "clients=1,duration=5.0,mode=socket,verbose=false,governor:performance,pin:0-1,"
        "sysctl:kernel.sched_autogroup_enabled=0,"
        "sysfs:/sys/module/rcutree/parameters/jiffies_till_first_fqs=1"
    )
    assert (first.repeat, first.warmup, first.monitors, first.target) == (
        3,
        0,
        ("proc-stat", "vmstat"),
        "local",
    )


def test_defaults(tmp_path: Path) -> None:
    job = load_job(write(tmp_path, "benchmark: toy\n", name="minimal.yml"))
    assert job.name == "minimal"
    assert (job.repeat, job.warmup) == (5, 1)
    assert job.monitors == DEFAULT_MONITORS
    assert job.params == {} and job.tunables == {} and job.target == "local"
    [case] = expand(job)
    assert case.params == {"clients": 1, "duration": 5.0, "mode": "pipe", "verbose": False}
    assert case.key == "clients=1,duration=5.0,mode=pipe,verbose=false"
    assert case.governor is None and case.pin is None


def test_name_and_empty_monitors(tmp_path: Path) -> None:
    job = load_job(write(tmp_path, "name: nightly\nbenchmark: bare\nmonitors: []\n"))
    assert job.name == "nightly" and job.monitors == ()
    assert [c.key for c in expand(job)] == ["default"]


def test_matrix_2x2_distinct_keys_in_file_order(tmp_path: Path) -> None:
    job = load_job(
        write(
            tmp_path,
            """
            benchmark: toy
            params:
              mode: [socket, pipe]
              clients: [2, 1]
            """,
        )
    )
    cases = expand(job)
    assert len(cases) == 4
    assert len({c.key for c in cases}) == 4
    # File order, last axis fastest; keys themselves sort parameters by name.
    assert [(c.params["mode"], c.params["clients"]) for c in cases] == [
        ("socket", 2),
        ("socket", 1),
        ("pipe", 2),
        ("pipe", 1),
    ]
    assert expand(job) == cases  # deterministic
    assert all(isinstance(c, Case) for c in cases)


def test_matrix_over_params_and_tunables(tmp_path: Path) -> None:
    job = load_job(
        write(
            tmp_path,
            """
            benchmark: toy
            params: {clients: [1, 2]}
            tunables:
              sysctl: {kernel.sched_autogroup_enabled: [0, 1]}
              governor: [performance, powersave]
              pin: ["0", "0-1"]
            """,
        )
    )
    cases = expand(job)
    assert len(cases) == 16 and len({c.key for c in cases}) == 16
    assert {c.governor for c in cases} == {"performance", "powersave"}
    assert cases[-1].tunables == {
        "sysctl": {"kernel.sched_autogroup_enabled": 1},
        "governor": {"governor": "powersave"},
        "pin": {"pin": "0-1"},
    }


def test_key_independent_of_file_order(tmp_path: Path) -> None:
    a = load_job(write(tmp_path, "benchmark: toy\nparams: {clients: 2, mode: socket}\n", "a.yaml"))
    b = load_job(write(tmp_path, "benchmark: toy\nparams: {mode: socket, clients: 2}\n", "b.yaml"))
    assert expand(a)[0].key == expand(b)[0].key


def test_key_quotes_separators() -> None:
    case = Case("j", "toy", {"label": "a,b=c"}, {"pin": {"pin": "0,2"}}, 1, 0, (), "local")
    assert case.key == 'label="a,b=c",pin:"0,2"'


def test_pin_accepts_int_and_normalizes(tmp_path: Path) -> None:
    job = load_job(write(tmp_path, "benchmark: toy\ntunables: {pin: 0}\n"))
    assert job.tunables == {"pin": {"pin": "0"}}
    job = load_job(write(tmp_path, "benchmark: toy\ntunables: {pin: '0, 2-3'}\n"))
    assert job.tunables == {"pin": {"pin": "0,2-3"}}


def test_float_param_exponent(tmp_path: Path) -> None:
    job = load_job(write(tmp_path, "benchmark: toy\nparams: {duration: 1e3}\n"))
    assert job.params == {"duration": 1000.0}


# -- errors: each names file:line and suggests where it can -------------------------

ERRORS = [
    pytest.param(
        "benchmark: toy\nrepaet: 3\n",
        2,
        "unknown key 'repaet': did you mean 'repeat' or 'max_repeat'?",
        id="unknown-top-key",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  duration: 2\n  client: 4\n",
        4,
        "unknown parameter 'client': did you mean 'clients'?",
        id="unknown-param",
    ),
    pytest.param(
        "benchmark: bare\nparams:\n  x: 1\n",
        3,
        "benchmark 'bare' takes no parameters",
        id="param-for-paramless-benchmark",
    ),
    pytest.param(
        "benchmark: toy\ntunables:\n  sysctls: {vm.swappiness: 10}\n",
        3,
        "unknown tunable kind 'sysctls': did you mean 'sysctl'",
        id="unknown-tunable-kind",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  clients: [1,\n    two]\n",
        4,
        "clients must be an integer, got 'two'",
        id="wrong-type-in-list",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  clients: 0\n",
        3,
        "clients must be at least 1, got 0",
        id="below-minimum",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  mode: tcp\n",
        3,
        "mode must be one of pipe, socket, got 'tcp'",
        id="not-a-choice",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  verbose: 1\n",
        3,
        "verbose must be true or false, got 1",
        id="bool-type",
    ),
    pytest.param(
        "# nightly\nrepeat: 3\nbenchmark: sched-pipes\n",
        3,
        "unknown benchmark 'sched-pipes': did you mean sched-pipe?",
        id="unknown-benchmark",
    ),
    pytest.param(
        "benchmark: toy\nmonitors:\n  - proc-stat\n  - vmstats\n",
        4,
        "unknown monitor 'vmstats': did you mean vmstat",
        id="unknown-monitor",
    ),
    pytest.param(
        "benchmark: toy\nmonitors: [vmstat, vmstat]\n",
        2,
        "monitor 'vmstat' is named twice",
        id="duplicate-monitor",
    ),
    pytest.param(
        "benchmark: toy\ntarget: locl\n",
        2,
        "unknown target 'locl': did you mean 'local'?",
        id="bad-target",
    ),
    pytest.param(
        "benchmark: toy\ntarget: qemu\n",
        2,
        "target qemu needs a kernel: `kernel: NAME`",
        id="qemu-target-without-kernel",
    ),
    pytest.param(
        "benchmark: toy\nrepeat: 3\nwarmup: 0\nrepeat: 4\n",
        4,
        "duplicate key 'repeat' in the job file (first at line 2)",
        id="duplicate-top-key",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  clients: 1\n  clients: 2\n",
        4,
        "duplicate key 'clients' in params (first at line 3)",
        id="duplicate-param",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  clients: []\n",
        3,
        "params.clients: empty list",
        id="empty-list",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  clients: [1, 2, 1]\n",
        3,
        "params.clients: value 1 is listed twice",
        id="duplicate-list-value",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  clients: [[1, 2]]\n",
        3,
        "list items must be single values",
        id="nested-list",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  clients:\n",
        3,
        "params.clients has no value",
        id="null-param",
    ),
    pytest.param(
        "benchmark: toy\nparams: [clients]\n",
        2,
        "params must be a mapping",
        id="params-not-mapping",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  clients: [1, 2\nrepeat: 3\n",
        4,
        "invalid YAML:",
        id="invalid-yaml-flow",
    ),
    pytest.param(
        "benchmark: toy\n  repeat: 3\n",
        2,
        "invalid YAML: mapping values are not allowed here",
        id="invalid-yaml-indent",
    ),
    pytest.param(
        "benchmark: toy\n---\nbenchmark: toy\n",
        2,
        "invalid YAML: expected a single document",
        id="two-documents",
    ),
    pytest.param("", 1, "empty job file", id="empty-file"),
    pytest.param("# only a comment\n\n", 1, "empty job file", id="comments-only"),
    pytest.param("- benchmark: toy\n", 1, "the job file must be a mapping", id="top-list"),
    pytest.param(
        "name: x\nparams: {clients: 2}\n", 1, "missing required key 'benchmark'", id="no-benchmark"
    ),
    pytest.param(
        "benchmark: [toy, bare]\n", 1, "benchmark must be a single value", id="benchmark-list"
    ),
    pytest.param("benchmark: toy\nrepeat: 0\n", 2, "repeat must be an integer >= 1", id="repeat-0"),
    pytest.param(
        "benchmark: toy\nrepeat: 2.5\n", 2, "repeat must be an integer >= 1", id="repeat-float"
    ),
    pytest.param(
        "benchmark: toy\nrepeat: 4\nprecision: 1%\n", 3, "precision applies only to `repeat: auto`",
        id="precision-without-auto",
    ),
    pytest.param(
        "benchmark: toy\nwarmup: -1\n", 2, "warmup must be an integer >= 0", id="warmup-neg"
    ),
    pytest.param(
        "benchmark: toy\nwarmup: true\n", 2, "warmup must be an integer >= 0", id="warmup-bool"
    ),
    pytest.param(
        "benchmark: toy\ntunables:\n  sysctl:\n    kernel/sched_autogroup_enabled: 1\n",
        4,
        "did you mean 'kernel.sched_autogroup_enabled'?",
        id="sysctl-slashes",
    ),
    pytest.param(
        "benchmark: toy\ntunables:\n  sysctl:\n    /proc/sys/vm/swappiness: 1\n",
        4,
        "did you mean 'vm.swappiness'?",
        id="sysctl-proc-path",
    ),
    pytest.param(
        "benchmark: toy\ntunables:\n  sysctl:\n    vm.swappiness: on\n",
        4,
        "reads as true/false",
        id="sysctl-bool",
    ),
    pytest.param(
        "benchmark: toy\ntunables:\n  sysfs:\n    module/rcutree/parameters/x: 1\n",
        4,
        "must be a normalized absolute path under /sys/",
        id="sysfs-relative",
    ),
    pytest.param(
        "benchmark: toy\ntunables:\n  sysfs:\n    /sys/../etc/passwd: 1\n",
        4,
        "must be a normalized absolute path under /sys/",
        id="sysfs-dotdot",
    ),
    pytest.param(
        "benchmark: toy\ntunables:\n  sysfs:\n    /proc/sys/vm/swappiness: 1\n",
        4,
        "is a sysctl: write it under tunables.sysctl as 'vm.swappiness'",
        id="sysfs-proc-sys",
    ),
    pytest.param(
        "benchmark: toy\ntunables:\n  governor: [performance, performace]\n",
        3,
        "unknown governor 'performace': did you mean 'performance'?",
        id="bad-governor",
    ),
    pytest.param(
        "benchmark: toy\ntunables:\n  pin: 0-x\n",
        3,
        "pin must be a CPU list like '0-1' or '0,2'",
        id="bad-pin",
    ),
    pytest.param(
        "benchmark: toy\ntunables:\n  pin: 3-1\n",
        3,
        "CPU range '3-1' runs backwards",
        id="pin-backwards",
    ),
    pytest.param(
        "benchmark: toy\nparams: {duration: .nan}\n", 2, "is not a finite number", id="nan"
    ),
    pytest.param(
        "benchmark: toy\nparams: {label: 2024-01-01}\n", 2, "quote it for a string", id="date-value"
    ),
    pytest.param(
        "benchmark: toy\nparams: {label: !!python/object:os.system x}\n",
        2,
        "invalid",
        id="unsafe-tag",
    ),
    pytest.param(
        "benchmark: toy\nbase: &b {clients: 1}\nparams:\n  <<: *b\n",
        2,
        "unknown key 'base'",
        id="anchor-unknown-key",
    ),
    pytest.param(
        "benchmark: toy\nparams:\n  <<: {clients: 1}\n",
        3,
        "merge keys ('<<') are not supported",
        id="merge-key",
    ),
]


@pytest.mark.parametrize(("text", "line", "message"), ERRORS)
def test_errors_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(JobError) as info:
        load_job(path)
    err = info.value
    assert err.path == str(path)
    assert err.line == line, str(err)
    assert str(err).startswith(f"{path}:{line}: "), str(err)
    assert message in err.message, str(err)


def test_matrix_too_large(tmp_path: Path) -> None:
    clients = list(range(1, 41))
    durations = [float(d) for d in range(1, 31)]
    path = write(
        tmp_path,
        f"benchmark: toy\nparams:\n  clients: {clients}\n  duration: {durations}\n",
    )
    with pytest.raises(JobError) as info:
        load_job(path)
    assert info.value.line == 3
    assert "40 clients × 30 duration = 1200 cases" in str(info.value)
    assert str(MAX_CASES) in str(info.value)


def test_matrix_limit_exact(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"benchmark: toy\nparams:\n  clients: {list(range(1, 101))}\n"
        "tunables:\n  sysctl: {vm.swappiness: [0, 10, 20, 30, 40, 50, 60, 70, 80, 90]}\n",
    )
    assert len(expand(load_job(path))) == MAX_CASES


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(JobError) as info:
        load_job(tmp_path / "nope.yaml")
    assert str(info.value).startswith(f"{tmp_path / 'nope.yaml'}: cannot read job file")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"benchmark: toy\nname: \xff\xfe\n")
    with pytest.raises(JobError) as info:
        load_job(path)
    assert info.value.line == 2 and "not UTF-8" in str(info.value)


def test_control_character(tmp_path: Path) -> None:
    path = tmp_path / "ctl.yaml"
    path.write_text("benchmark: toy\n\nname: a\x07b\n")
    with pytest.raises(JobError) as info:
        load_job(path)
    assert info.value.line == 3 and "invalid YAML" in str(info.value)


def test_unloadable_benchmark_is_a_job_error(tmp_path: Path) -> None:
    # Real names point at a missing attribute in the fixture registry.
    with pytest.raises(JobError) as info:
        load_job(write(tmp_path, "repeat: 2\nbenchmark: tbench\n"))
    assert info.value.line == 2 and "benchmark 'tbench' cannot be loaded" in str(info.value)


def test_parsing_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jobdir = tmp_path / "jobs"
    jobdir.mkdir()
    good = write(jobdir, "benchmark: toy\nparams: {clients: [1, 2]}\n", "good.yaml")
    bad = write(jobdir, "benchmark: toy\nrepaet: 1\n", "bad.yaml")
    monkeypatch.chdir(tmp_path)

    def snapshot() -> dict[str, float]:
        return {
            str(Path(root, f)): os.stat(Path(root, f)).st_mtime
            for root, _, files in os.walk(tmp_path)
            for f in files
        } | {str(Path(root, d)): 0.0 for root, dirs, _ in os.walk(tmp_path) for d in dirs}

    before = snapshot()
    expand(load_job(good))
    with pytest.raises(JobError):
        load_job(bad)
    expand(job_from_benchmark("toy", {"clients": "3"}, 2, 0, []))
    assert snapshot() == before


# -- command line --------------------------------------------------------------------


def test_job_from_benchmark_converts_strings() -> None:
    job = job_from_benchmark(
        "toy",
        {"clients": "4", "duration": "2.5", "mode": "socket", "verbose": "yes"},
        repeat=3,
        warmup=0,
        monitors=["vmstat"],
    )
    assert job == JobSpec(
        name="toy",
        benchmark="toy",
        params={"clients": 4, "duration": 2.5, "mode": "socket", "verbose": True},
        repeat=3,
        warmup=0,
        monitors=("vmstat",),
    )
    [case] = expand(job)
    assert case.key == "clients=4,duration=2.5,mode=socket,verbose=true"


def test_job_from_benchmark_defaults_and_typed_values() -> None:
    job = job_from_benchmark("toy", {"clients": 2, "duration": 3})
    assert (job.repeat, job.warmup, job.monitors) == (5, 1, DEFAULT_MONITORS)
    assert job.params == {"clients": 2, "duration": 3.0}
    assert job.path is None


def test_job_from_benchmark_list_is_axis() -> None:
    job = job_from_benchmark("toy", {"clients": ["1", "2"]}, 1, 0, [])
    assert [c.params["clients"] for c in expand(job)] == [1, 2]


def test_cli_string_same_key_as_file(tmp_path: Path) -> None:
    from_file = load_job(write(tmp_path, "benchmark: toy\nparams: {duration: 5, clients: 2}\n"))
    from_cli = job_from_benchmark("toy", {"duration": "5", "clients": "2"}, 5, 1, None)
    assert expand(from_file)[0].key == expand(from_cli)[0].key


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"params": {"clients": "abc"}}, "--param clients=abc: clients must be an integer"),
        ({"params": {"clients": "2.5"}}, "clients must be an integer"),
        ({"params": {"clients": "0"}}, "--param clients=0: clients must be at least 1, got 0"),
        ({"params": {"duration": "fast"}}, "--param duration=fast: duration must be a number"),
        ({"params": {"duration": "inf"}}, "duration must be a number"),
        ({"params": {"verbose": "maybe"}}, "--param verbose=maybe: verbose must be true or false"),
        ({"params": {"mode": "tcp"}}, "mode must be one of pipe, socket, got 'tcp'"),
        (
            {"params": {"clinets": "2"}},
            "--param clinets: unknown parameter 'clinets': did you mean 'clients'?",
        ),
        ({"params": {"clients": []}}, "--param clients: empty list"),
        ({"params": {"clients": ["1", "1"]}}, "--param clients: 1 is given twice"),
        ({"benchmark": "sched-pipes"}, "unknown benchmark 'sched-pipes': did you mean sched-pipe?"),
        ({"monitors": ["perf-stats"]}, "unknown monitor 'perf-stats': did you mean perf-stat"),
        ({"repeat": 0}, "repeat must be an integer >= 1, got 0"),
        ({"repeat": "auto", "max_repeat": 3}, "max_repeat must be an integer >= 5, got 3"),
        ({"repeat": "auto", "precision": "x%"}, "precision must be a positive percentage"),
        ({"warmup": -1}, "warmup must be an integer >= 0, got -1"),
        ({"target": "fleet"}, "unknown target 'fleet'"),
        ({"target": "qemu"}, "--kernel: target qemu needs a kernel"),
    ],
)
def test_job_from_benchmark_errors(kwargs: dict, message: str) -> None:
    args = {"benchmark": "toy", "params": {}, **kwargs}
    with pytest.raises(JobError) as info:
        job_from_benchmark(**args)
    assert str(info.value).startswith("command line: ")
    assert info.value.line is None
    assert message in str(info.value)


def test_job_from_benchmark_string_counts() -> None:
    job = job_from_benchmark("toy", {}, repeat="7", warmup="0")
    assert (job.repeat, job.warmup) == (7, 0)


def test_cli_matrix_too_large() -> None:
    with pytest.raises(JobError, match="1200 cases"):
        job_from_benchmark(
            "toy", {"clients": [str(i) for i in range(1, 41)], "duration": list(range(1, 31))}
        )


def test_parse_param_args() -> None:
    assert parse_param_args(["loops=1000", " mode = a=b "]) == {"loops": "1000", "mode": "a=b"}
    with pytest.raises(JobError, match="expected NAME=VALUE"):
        parse_param_args(["loops"])
    with pytest.raises(JobError, match="given twice"):
        parse_param_args(["loops=1", "loops=2"])


# -- example job files against the real benchmarks ----------------------------------


@pytest.mark.parametrize("name", ["ftrace-switch", "sched-pipe", "tbench", "demo"])
def test_example_jobs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lookup_module, "BENCHMARKS", BENCHMARKS)
    path = EXAMPLES / f"{name}.yaml"
    job = load_job(path)
    cases = expand(job)
    assert cases and len({c.key for c in cases}) == len(cases)
    if name == "tbench":
        assert [c.params["clients"] for c in cases] == [1, 2, 4] and job.repeat == 3
    if name == "ftrace-switch":
        assert cases[0].params["iterations"] == 100 and (job.repeat, job.warmup) == (5, 1)
    if name == "demo":
        assert job.monitors == ("proc-stat", "vmstat", "perf-stat")
        assert [c.params["cpus"] for c in cases] == ["0", "0,1"]


def test_repeat_auto_with_precision_and_cap(tmp_path: Path) -> None:
    job = load_job(write(tmp_path, "benchmark: toy\nrepeat: auto\nprecision: 2%\nmax_repeat: 12\n"))
    assert (job.repeat, job.precision_pct) == (12, 2.0)
    assert all(case.precision_pct == 2.0 and case.repeat == 12 for case in expand(job))
    default = load_job(write(tmp_path, "benchmark: toy\nrepeat: auto\n", name="auto.yaml"))
    assert (default.repeat, default.precision_pct) == (30, 1.0)
    fixed = load_job(write(tmp_path, "benchmark: toy\nrepeat: 4\n", name="fixed.yaml"))
    assert fixed.precision_pct is None


def test_repeat_auto_from_command_line() -> None:
    job = job_from_benchmark("toy", repeat="auto", precision="0.5%", max_repeat="8")
    assert (job.repeat, job.precision_pct) == (8, 0.5)
