"""Ids beyond what a row can have (64-bit) at every boundary that takes one: on the
command line each is "no such ..." in one `error:` line and exit 2; in the dashboard and
its API a 404. Binding such an id raised OverflowError inside SQLite's driver before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from perfline.store import Store
from perfline.web.app import create_app
from perfline.web.assets import vendor_dir
from perfline.web.auth import Tokens

HUGE = str(2**64 + 12345)


@pytest.mark.parametrize("args", [["show", HUGE], ["compare", HUGE, "1"], ["report", "regression", HUGE],
                                  ["regressions", "mark", HUGE, "fixed"], ["bisect", "status", HUGE],
                                  ["bisect", "log", HUGE], ["bisect", "resume", HUGE]], ids=" ".join)
def test_an_id_beyond_64_bits_is_one_error_line(tmp_path: Path, args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "s.db"), *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: no ") and HUGE in line, line


@pytest.mark.parametrize("path", ["/runs/{}", "/regressions/{}", "/bisections/{}", "/api/runs/{}",
                                  "/api/regressions/{}", "/api/bisections/{}"])
def test_the_dashboard_answers_404_for_an_id_beyond_64_bits(tmp_path: Path, path: str) -> None:
    store = Store.open(str(tmp_path / "s.db"))
    (tmp_path / "tokens").write_text("")
    client = TestClient(create_app(store, Tokens.load(tmp_path / "tokens"), vendor_dir()))
    assert client.get(path.format(HUGE)).status_code == 404
    assert client.get(path.format(1)).status_code == 404  # and an id in range that names nothing
