"""Starting `perfline` imports none of the heavy libraries its commands use.

Every command the user types, and every CLI test's subprocess, pays what perfline.cli.app
imports. scipy alone cost 0.7 s of CPU there, SQLAlchemy 0.5 s (bench/startup.py has the
figures); the modules import them where a command computes or opens the store. These
tests read which modules a real `perfline` process loaded, so they fail when a
module-level import brings one back, without timing anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfline.store import Store

SRC = Path(__file__).resolve().parents[1] / "src"
# Libraries no command needs before it computes, draws or opens the store.
HEAVY = ("scipy", "numpy", "matplotlib", "pandas", "sqlalchemy", "alembic", "procrastinate", "psycopg")
# Of those, what a command that lists the runs of a store at the schema's head needs.
STORE = ("sqlalchemy",)

# Runs perfline's own entry point, then prints the top-level packages loaded by the end.
LOADED_AT_EXIT = """
import atexit, json, sys
atexit.register(lambda: print("LOADED " + json.dumps(sorted({m.split(".")[0] for m in sys.modules})),
                              file=sys.stderr))
sys.argv = ["perfline", *sys.argv[1:]]
from perfline.cli import main
main()
"""


def env() -> dict[str, str]:
    """The test's environment (conftest's settings included), with this tree's perfline
    first on the path, whatever is installed."""
    return {**os.environ, "PYTHONPATH": str(SRC)}


def loaded(*argv: str) -> set[str]:
    """The top-level packages a `perfline ARGV` process had imported when it exited."""
    result = subprocess.run([sys.executable, "-c", LOADED_AT_EXIT, *argv], env=env(), capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stderr.splitlines() if line.startswith("LOADED "))
    return set(json.loads(line.removeprefix("LOADED ")))


def test_importing_the_cli_loads_no_heavy_library() -> None:
    code = f"import sys, perfline.cli.app; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    result = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("argv", [["--help"], ["runs", "--help"], ["version"]])
def test_help_and_version_load_no_heavy_library(argv: list[str]) -> None:
    assert loaded(*argv) & set(HEAVY) == set()


def test_listing_runs_loads_only_the_store(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    Store.open(str(db)).close()  # at the schema's head, as a user's store is: no migration (alembic) to run
    found = loaded("--db", str(db), "runs", "--limit", "1")
    assert set(STORE) <= found  # the probe sees the store's library when it is loaded
    assert found & set(HEAVY) - set(STORE) == set()
