"""The dashboard: its API through FastAPI's TestClient, and its pages in a real browser
(Playwright driving Debian's chromium) against `perfline serve`, on a store filled by a
real tracked history (conftest.tracked_history) that holds hostile strings."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from conftest import LABEL_ATTACK, SCRIPT_SUBJECT
from perfline.store import Store
from perfline.web.app import create_app
from perfline.web.assets import vendor_dir
from perfline.web.auth import Tokens
from web_site import browser, serving  # noqa: F401 - browser: a fixture

TOKEN = "s3cret-token-for-tests"


@pytest.fixture
def site(tracked_history: Path, tmp_path: Path) -> Path:
    """A copy of the tracked history (triage writes to it) and a token file."""
    where = tmp_path / "site"
    where.mkdir()
    shutil.copy(tracked_history / "db", where / "db")
    (where / "tokens").write_text(f"# who may triage\nalice {TOKEN}\n")
    return where


@pytest.fixture
def client(site: Path) -> TestClient:
    store = Store.open(str(site / "db"))
    return TestClient(create_app(store, Tokens.load(site / "tokens"), vendor_dir()))


def test_api_serves_trackers_series_regressions_runs_and_bisections(client: TestClient) -> None:
    [tracker] = client.get("/api/trackers").json()
    assert tracker["name"] == "demo" and tracker["tested"] == 6 and len(tracker["daily_numbers"]) == 6
    [series] = client.get("/api/series", params={"metric": "command.seconds"}).json()["series"]
    assert series["points_total"] == 6 and not series["downsampled"]  # bisection probes are not points
    [change] = series["changes"]
    assert change["kind"] == "regression" and change["culprit_subject"] == f"sched/eevdf: {SCRIPT_SUBJECT}"
    means = series["points"]["mean"]  # columns, one array per field
    assert means[change["x"]] > means[change["x"] - 1]
    assert len(series["points"]["commit"]) == 6 and all(series["points"]["subject"])
    long = client.get("/api/series", params={"metric": "command.seconds", "max_points": 10}).json()
    assert len(long["series"][0]["points"]["mean"]) == 6
    [regression] = [r for r in client.get("/api/regressions").json() if r["kind"] == "regression"]
    assert regression["status"] == "bisected" and regression["triage"] == "untriaged"
    runs = client.get("/api/runs", params={"limit": 500}).json()
    assert any(run["label"] == LABEL_ATTACK for run in runs)
    assert client.get(f"/api/runs/{runs[0]['id']}").json()["summary"]
    bisection = client.get(f"/api/bisections/{regression['bisection']}").json()
    assert bisection["status"] == "found" and bisection["probes"]
    assert client.get("/api/runs/999999").status_code == 404
    schema = client.get("/api/openapi.json").json()
    assert {"/api/series", "/api/regressions/{regression_id}", "/api/trackers"} <= set(schema["paths"])


def test_triage_needs_a_token_and_keeps_its_history(client: TestClient) -> None:
    before = client.get("/api/regressions/1").json()
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN}):
        refused = client.post("/api/regressions/1", json={"triage": "acknowledged"}, headers=headers)
        assert refused.status_code == 401
    assert client.post("/api/regressions/999", json={"triage": "fixed"}).status_code == 401  # whatever the id
    assert client.get("/api/regressions/1").json() == before
    auth = {"Authorization": f"Bearer {TOKEN}"}
    bad = client.post("/api/regressions/1", json={"triage": "solved"}, headers=auth)
    assert bad.status_code == 400 and "acknowledged" in bad.json()["detail"]
    done = client.post("/api/regressions/1", json={"triage": "investigating", "owner": "alice", "due": "2026-12-01"},
                       headers=auth).json()
    assert (done["triage"], done["owner"], done["due"]) == ("investigating", "alice", "2026-12-01")
    assert [(e["who"], e["field"], e["new"]) for e in done["history"]] == [
        ("alice", "triage", "investigating"), ("alice", "owner", "alice"), ("alice", "due", "2026-12-01")]


def test_pages_escape_and_forbid_inline_script(client: TestClient) -> None:
    for url in ("/", "/series?metric=command.seconds", "/regressions", "/regressions/1", "/runs", "/bisections/1",
                "/compare?a=3&b=4"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert SCRIPT_SUBJECT not in response.text and LABEL_ATTACK not in response.text, url
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in client.get("/regressions").text
    assert client.get("/runs/999999").status_code == 404


# ---- in a browser ----------------------------------------------------------------


@pytest.fixture
def server(site: Path) -> Iterator[str]:
    """A server of its own, for a test that triages."""
    with serving(site / "db", site / "tokens") as url:
        yield url


@pytest.fixture(scope="module")
def reader(tracked_history: Path) -> Iterator[str]:
    """One server on the tracked history for the tests that only read (it starts in
    seconds to tens of seconds on a loaded machine)."""
    with serving(tracked_history / "db") as url:
        yield url


PAGES = {"front": "/", "series": "/series?metric=command.seconds", "regressions": "/regressions",
         "regression": "/regressions/1", "runs": "/runs", "bisection": "/bisections/1", "compare": "/compare?a=3&b=4"}


def test_every_page_in_chromium_runs_no_stored_script(reader: str, browser: object, tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    for name, url in PAGES.items():
        page.goto(reader + url)
        page.wait_for_load_state("networkidle")
        assert page.evaluate("typeof window.pwned") == "undefined", name
        page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    assert errors == []


def test_series_page_draws_and_hover_shows_the_commit(reader: str, browser: object, tracked_history: Path) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    page.goto(reader + "/series?metric=command.seconds")
    page.wait_for_selector("[data-series][data-drawn='1'] canvas")
    first_paint = page.evaluate(
        "performance.getEntriesByType('paint').map(e => e.startTime).reduce((a, b) => Math.max(a, b), 0)")
    assert first_paint > 0
    over = page.locator(".u-over").first
    box = over.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)  # the head, the last point
    head = subprocess.run(["git", "-C", str(tracked_history / "src"), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    page.wait_for_function("document.querySelector('.hover').textContent.length > 0")
    hover = page.locator(".hover").text_content() or ""
    assert hover.startswith(head) and f"sched/eevdf: {SCRIPT_SUBJECT}" not in hover  # not the culprit: the head
    assert "±" in hover and "sd of 5 samples" in hover and "run " in hover


def test_triage_in_the_page_with_and_without_the_token(server: str, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(server + "/regressions/1")
    page.select_option("form.triage select[name=triage]", "acknowledged")
    page.fill("form.triage input[name=token]", "not-the-token-0123456789")
    page.click("form.triage button[type=submit]")
    assert "a valid token is needed" in page.content()
    page.goto(server + "/regressions/1")
    assert page.locator(".triage-state").text_content() == "untriaged"
    page.select_option("form.triage select[name=triage]", "acknowledged")
    page.fill("form.triage input[name=owner]", "alice")
    page.fill("form.triage input[name=token]", TOKEN)
    page.click("form.triage button[type=submit]")
    page.wait_for_url(server + "/regressions/1")
    assert page.locator(".triage-state").text_content() == "acknowledged"
    assert "alice: triage untriaged → acknowledged" in page.locator("ul.history").text_content()
    # The token was kept in this browser: the next change needs no typing.
    page.select_option("form.triage select[name=triage]", "fixed")
    page.click("form.triage button[type=submit]")
    page.wait_for_url(server + "/regressions/1")
    assert page.locator(".triage-state").text_content() == "fixed"




def test_a_long_series_is_downsampled_to_buckets_of_mean_and_range(tracked_history: Path) -> None:
    from perfline.web.series_data import series_json

    store = Store.open(str(tracked_history / "db"))
    full = series_json(store, "command.seconds", None, None)["series"][0]
    [short] = series_json(store, "command.seconds", None, None, max_points=3)["series"]
    assert short["downsampled"] and len(short["points"]["mean"]) == 3 and short["points_total"] == 6
    values = full["points"]
    for i in range(3):  # buckets of two points
        assert short["points"]["min"][i] == min(values["min"][2 * i:2 * i + 2])
        assert short["points"]["max"][i] == max(values["max"][2 * i:2 * i + 2])
        assert short["points"]["n"][i] == sum(values["n"][2 * i:2 * i + 2])
    assert short["changes"][0]["x"] == full["changes"][0]["x"] // 2


def _changes(read: Callable[[], tuple[float, float]], before: tuple[float, float]) -> tuple[float, float]:
    """Poll until `read()` differs from `before` (the page's CSP forbids evaluating a
    string of JavaScript, which Playwright's wait_for_function would do)."""
    deadline = time.monotonic() + 10
    while (now := read()) == before:
        assert time.monotonic() < deadline, "nothing changed"
        time.sleep(0.05)
    return now


def test_the_series_chart_zooms_and_pans(reader: str, browser: object) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    page.goto(reader + "/series?metric=command.seconds")
    page.wait_for_selector("[data-series][data-drawn='1'] canvas")
    box = page.locator(".u-over").first.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    chart = page.locator("[data-series]").first

    def shown() -> tuple[float, float]:
        low, high = (chart.get_attribute("data-range") or "nan:nan").split(":")
        return float(low), float(high)

    before = shown()
    page.mouse.wheel(0, -300)  # zoom in around the pointer
    zoomed = _changes(shown, before)
    assert zoomed[1] - zoomed[0] < before[1] - before[0]
    page.keyboard.down("Shift")
    page.mouse.wheel(0, 300)  # pan right: the same width, further on
    page.keyboard.up("Shift")
    panned = _changes(shown, zoomed)
    assert panned[0] > zoomed[0] and abs((panned[1] - panned[0]) - (zoomed[1] - zoomed[0])) < 0.01
