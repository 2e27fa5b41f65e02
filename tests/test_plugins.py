"""Out-of-tree benchmarks: a real distribution installed into a real venv, found through
its `perfline.benchmarks` entry point, listed and run by the perfline command."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

PLUGIN_MODULE = '''
"""A benchmark that lives outside perfline: sorts a shuffled list in Python."""

import random
import time

from perfline.benchmarks import Benchmark, Param
from perfline.records.metric import Direction, Measurement, Metric

SORT_MS = Metric("toy-sort.ms", "ms", Direction.LOWER, "wall time of sorted() on a shuffled list")


class ToySort(Benchmark):
    name = "toy-sort"
    summary = "sorted() of a shuffled list of integers"
    params = (Param("n", int, 20000, "list length", minimum=1),)
    metrics = (SORT_MS,)

    def run_once(self):
        items = list(range(int(self.values["n"])))
        random.Random(1).shuffle(items)
        start = time.perf_counter()
        sorted(items)
        return [Measurement(SORT_MS, (time.perf_counter() - start) * 1e3)]


class NotABenchmark:
    name = "not-a-benchmark"
'''

PYPROJECT = '''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "perfline-toy"
version = "0.1"

[project.entry-points."perfline.benchmarks"]
toy-sort = "perfline_toy:ToySort"
# Two broken plugins: one whose module does not exist, one that is not a Benchmark.
missing = "perfline_toy_missing:Nothing"
not-a-benchmark = "perfline_toy:NotABenchmark"
# A plugin cannot take a built-in name: `tbench` means perfline's tbench everywhere.
tbench = "perfline_toy:ToySort"

[tool.setuptools]
py-modules = ["perfline_toy"]
'''


@pytest.fixture(scope="module")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees perfline's environment and has perfline-toy installed in it."""
    root = tmp_path_factory.mktemp("plugin")
    source = root / "perfline-toy"
    source.mkdir()
    (source / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT))
    (source / "perfline_toy.py").write_text(textwrap.dedent(PLUGIN_MODULE))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    # perfline and its dependencies come from the project's own environment.
    (site / "perfline_env.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--prefix", str(venv), str(source)],
        check=True, capture_output=True,
    )
    return venv


def perfline(venv: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "perfline", "--db", str(db), *args],
        capture_output=True, text=True, timeout=300, check=False,
    )


def test_installed_benchmark_is_listed_with_its_distribution(plugin_venv: Path, tmp_path: Path) -> None:
    proc = perfline(plugin_venv, tmp_path / "db", "list")
    assert proc.returncode == 0, proc.stderr
    [row] = [line for line in proc.stdout.splitlines() if "toy-sort" in line]
    assert "perfline-toy 0.1" in row and "toy-sort.ms" in row
    # Broken plugins are named with why, and do not hide the rest of the catalogue.
    assert "perfline_toy_missing" in proc.stdout and "does not load" in proc.stdout
    assert "is not a subclass of Benchmark" in proc.stdout
    assert "sched-pipe" in proc.stdout
    [tbench] = [line for line in proc.stdout.splitlines() if line.strip().startswith("│ tbench")]
    assert "perfline" in tbench and "perfline-toy" not in tbench


def test_installed_benchmark_runs_and_stores_its_metric(plugin_venv: Path, tmp_path: Path) -> None:
    db = tmp_path / "db"
    proc = perfline(plugin_venv, db, "run", "toy-sort", "-p", "n=5000", "--repeat", "3", "--no-monitors", "--json")
    assert proc.returncode == 0, proc.stderr
    [run] = json.loads(proc.stdout)
    assert run["status"] == "completed"
    summary = run["summary"]["toy-sort.ms"]
    assert summary["n"] == 3 and summary["mean"] > 0


def test_broken_plugin_is_one_error_line(plugin_venv: Path, tmp_path: Path) -> None:
    proc = perfline(plugin_venv, tmp_path / "db", "run", "missing", "--repeat", "1")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and "perfline_toy_missing" in line


def test_plugin_is_not_seen_outside_its_environment(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "run", "toy-sort"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 2 and "unknown benchmark 'toy-sort'" in proc.stderr
