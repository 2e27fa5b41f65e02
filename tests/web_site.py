"""What the dashboard's browser tests share: `perfline serve` on a store, and Debian's
Chromium driven by Playwright."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from conftest import free_port

CHROMIUM = Path("/usr/bin/chromium")


@contextmanager
def serving(db: Path, tokens: Path | None = None) -> Iterator[str]:
    """`perfline serve` on the store, until the block ends; its URL."""
    port = free_port()
    command = [sys.executable, "-m", "perfline", "--db", str(db), "serve", "--port", str(port)]
    proc = subprocess.Popen(command + (["--token-file", str(tokens)] if tokens else []), stderr=subprocess.PIPE,
                            text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                if httpx.get(url + "/api/trackers", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing (`make test` installs it)", pytrace=False)
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()
