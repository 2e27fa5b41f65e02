"""What the dashboard's browser tests share: `perfline serve` on a store (web/pages.py's,
which `make screenshots` uses too), and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

CHROMIUM = Path("/usr/bin/chromium")


def load_pages() -> ModuleType:
    """web/pages.py (a script beside the npm packages, not a module of perfline)."""
    spec = importlib.util.spec_from_file_location("pages", Path(__file__).resolve().parents[1] / "web" / "pages.py")
    assert spec is not None and spec.loader is not None
    pages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pages)
    return pages


serving = load_pages().served


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing (`make test` installs it)", pytrace=False)
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()
