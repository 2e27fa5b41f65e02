"""The dashboard's charts as a person reads them: commits on the x axis, series named by
what varies, every line in the legend, the changes and culprits marked, both sides'
samples on the compare page, a bisection's posterior after each probe; usable by
keyboard, and no serious or critical accessibility violation (axe-core) on any kind of
page. On the tracked history of conftest plus a two-case job at two of its commits."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

from perfline.analysis.comparison import Side
from perfline.bisect.driver import trace
from perfline.records.metric import Direction, Metric
from perfline.store import Store
from perfline.store.store import SampleColumns
from perfline.web.posterior_map import posterior_map
from perfline.web.sample_strips import MAX_DOTS, strips
from perfline.web.series_names import key_parts, name_series
from web_site import browser, load_pages, serving  # noqa: F401 - browser: a fixture

SHA = re.compile(r"[0-9a-f]{7}")
# Two cases that differ in their command only, run at two commits of the tracked tree.
VARIED_JOB = """name: varied
benchmark: command
params:
  cmd: ["echo 10", "echo 20"]
repeat: 3
warmup: 0
"""


def git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def varied(tracked_history: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tracked history's store with the two-case job at two commits."""
    where = tmp_path_factory.mktemp("varied")
    shutil.copy(tracked_history / "db", where / "db")
    (where / "varied.yaml").write_text(VARIED_JOB)
    for commit in git(tracked_history / "src", "rev-list", "--max-count=2", "HEAD").split()[::-1]:
        done = subprocess.run([sys.executable, "-m", "perfline", "--db", str(where / "db"), "run", "varied.yaml",
                               "--kernel-commit", commit, "--no-monitors"], capture_output=True, text=True,
                              cwd=where, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
    return where


@pytest.fixture(scope="module")
def server(varied: Path) -> Iterator[str]:
    with serving(varied / "db") as url:
        yield url


def commits_tested(tracked_history: Path) -> list[str]:
    store = Store.open(str(tracked_history / "db"))
    return [n.commit for n in store.daily_numbers("demo")]


# ---- without a browser ------------------------------------------------------------------


def test_a_case_key_is_split_into_its_parameters() -> None:
    parts = key_parts('cmd="a,b=c",loops=2,governor:performance,sysctl:kernel.x=1,note="say \\"hi\\", twice"')
    assert parts == {"cmd": 'cmd="a,b=c"', "loops": "loops=2", "governor:performance": "governor:performance",
                     "sysctl:kernel.x": "sysctl:kernel.x=1", "note": 'note="say \\"hi\\", twice"'}
    common, names = name_series([("cpus=0,loops=20000", "vm"), ('cpus="0,1",loops=20000', "vm"),
                                 ("cpus=0,loops=20000", "box")])
    assert common == ["loops=20000"]
    assert names == ["cpus=0, on vm", 'cpus="0,1", on vm', "cpus=0, on box"]
    assert name_series([("cpus=0,loops=1", "vm")]) == (["cpus=0", "loops=1", "on vm"], ["default"])
    assert name_series([("a=1,b=2", "vm"), ("a=1", "vm")])[1] == ["b=2", "no b"]


def test_the_series_api_names_series_by_what_varies(varied: Path) -> None:
    from fastapi.testclient import TestClient

    from perfline.web.app import create_app
    from perfline.web.assets import vendor_dir
    from perfline.web.auth import Tokens

    client = TestClient(create_app(Store.open(str(varied / "db")), Tokens({}), vendor_dir()))
    doc = client.get("/api/series", params={"metric": "command.value"}).json()
    # The tracked history's `echo 1` run is a third case of the metric.
    assert [s["name"] for s in doc["series"]] == ['cmd="echo 1"', 'cmd="echo 10"', 'cmd="echo 20"']
    assert "direction=lower" in doc["common"] and any(part.startswith("on ") for part in doc["common"])
    for s, value in zip(doc["series"][1:], (10.0, 20.0), strict=True):
        assert s["points"]["mean"] == [value, value] and s["points"]["sd"] == [0.0, 0.0]
    [seconds] = client.get("/api/series", params={"metric": "command.seconds"}).json()["series"]
    assert all(seconds["points"]["author"]) and all(seconds["points"]["date"])  # kept by the tracker, no git
    [change] = seconds["changes"]
    assert change["from"] == change["x"] - 1  # the tested commits on either side of the change
    assert [c["commit"] for c in change["culprits"]] == [change["culprit"]]


def test_the_front_page_marks_the_range_and_the_culprit_at_its_commit(varied: Path, tracked_history: Path) -> None:
    """As `track graph`'s PNG: the culprit at its first-parent position, from the store
    alone (the bisection's commits), equal to what git counts."""
    from fastapi.testclient import TestClient

    from perfline.web.app import create_app
    from perfline.web.assets import vendor_dir
    from perfline.web.auth import Tokens

    store = Store.open(str(varied / "db"))
    [tracker] = TestClient(create_app(store, Tokens({}), vendor_dir())).get("/api/trackers").json()
    [mark] = tracker["marks"]
    positions = {n["commit"]: n["position"] for n in tracker["daily_numbers"]}
    assert (mark["from"], mark["to"]) == (positions[mark["good"]], positions[mark["bad"]])
    [culprit] = mark["culprits"]
    since = store.tracker("demo").since
    assert culprit["position"] == int(git(tracked_history / "src", "rev-list", "--first-parent", "--count",
                                          f"{since}..{culprit['commit']}"))
    assert mark["from"] < culprit["position"] <= mark["to"]


def test_a_range_of_culprits_is_shown_whole(tracked_history: Path, tmp_path: Path) -> None:
    """A bisection that ended on a range (a commit next to the change did not build):
    every commit of it on the regressions list and on the front page's chart."""
    from fastapi.testclient import TestClient

    from perfline.store.store import Suspect
    from perfline.web.app import create_app
    from perfline.web.assets import vendor_dir
    from perfline.web.auth import Tokens

    shutil.copy(tracked_history / "db", tmp_path / "db")
    store = Store.open(str(tmp_path / "db"))
    culprit = store.get_regression(1).culprit
    assert culprit is not None
    commits = store.bisection(1).spec.commits
    parent = commits[commits.index(culprit) - 1]
    store.set_regression_narrowing(1, culprits=[Suspect(parent, "change 40", "did not build"),
                                                Suspect(culprit, "change 41", "measured bad")])
    client = TestClient(create_app(store, Tokens({}), vendor_dir()))
    listed = client.get("/regressions").text
    assert "any of 2:" in listed and f"<code>{parent[:12]}</code> change 40 <small>(did not build)</small>" in listed
    [mark] = client.get("/api/trackers").json()[0]["marks"]
    first, second = mark["culprits"]
    assert (first["commit"], second["commit"]) == (parent, culprit)
    assert second["position"] == first["position"] + 1


def test_a_bisection_shows_its_posterior_after_each_probe(tracked_history: Path) -> None:
    store = Store.open(str(tracked_history / "db"))
    record = store.bisection(1)
    steps = trace(store, record)
    drawn = posterior_map(record.spec.commits, steps)
    assert drawn is not None
    measured = [s for s in steps if s.posterior]
    assert len(drawn.rows) == len(measured) > 3
    for row in drawn.rows:
        total = sum(float(c.title.rsplit("= ", 1)[1]) for c in row.cells)
        assert abs(total - 1) < 0.01, row.label  # one distribution per row
    last = drawn.rows[-1].cells
    darkest = max(range(len(last)), key=lambda i: last[i].opacity)
    assert record.spec.commits[darkest] == record.result["culprit"]  # type: ignore[index]
    assert drawn.rows[0].cells[darkest].opacity < last[darkest].opacity  # it became sure of it


def test_the_compare_page_draws_both_sides_samples() -> None:
    metric = Metric("bench.seconds", "s", Direction.LOWER, "")

    def side(name: str, values: list[float]) -> Side:
        column = SampleColumns(metric, "benchmark", np.array(values), np.zeros(len(values), dtype=np.int64))
        return Side(name, [], {metric.name: column})

    few = strips([side("a", [1.0, 1.1, 1.2]), side("b", [2.0, 2.1])])["bench.seconds"]
    a, b = few.sides
    assert (len(a.dots), len(b.dots), a.box, b.box) == (3, 2, None, None)
    assert max(x for x, _ in a.dots) < min(x for x, _ in b.dots) and a.mean < b.mean
    assert (few.low, few.high) == ("1", "2.1")
    assert "a: 3 samples from 1 to 1.2, mean 1.1" in few.description
    many = strips([side("a", list(np.linspace(1, 2, MAX_DOTS + 1))), side("b", [1.5])])["bench.seconds"]
    box = many.sides[0].box
    assert box is not None and not many.sides[0].dots and box.low < box.q1 < box.median < box.q3 < box.high


# ---- in Chromium ------------------------------------------------------------------------


def ticks(page: object, selector: str) -> list[str]:
    return json.loads(page.get_attribute(selector, "data-x-ticks") or "null")  # type: ignore[attr-defined]


def test_x_ticks_are_commits_and_the_legend_names_what_varies(server: str, browser: object,
                                                              tracked_history: Path) -> None:
    tested = {c[:7] for c in commits_tested(tracked_history)}
    page = browser.new_page(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(server + "/")
    page.wait_for_selector("[data-numbers][data-drawn='1']")
    front = ticks(page, "[data-numbers]")
    assert front and set(front) <= tested, front  # only tested commits, by short sha
    legend = page.locator("ul.legend").text_content() or ""
    assert "dotted line at 100" in legend and "95% interval" in legend
    assert re.search(r"between tested commits [0-9a-f]{7} and [0-9a-f]{7}", legend)
    assert re.search(r"line: culprit [0-9a-f]{7} sched/eevdf: <script>", legend), legend  # as text

    page.goto(server + "/series?metric=command.seconds")
    page.wait_for_selector("[data-series][data-drawn='1']")
    assert set(ticks(page, "[data-series]")) == tested
    box = page.locator(".u-over").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    for _ in range(6):  # zoomed in until a tick is a commit or nothing: never 2.5
        page.mouse.wheel(0, -300)
        page.wait_for_timeout(50)
        assert all(SHA.fullmatch(t) or t == "" for t in ticks(page, "[data-series]")), ticks(page, "[data-series]")
    assert "the mean of each commit's samples" in (page.locator("ul.legend").text_content() or "")

    page.goto(server + "/series?metric=command.value")
    page.wait_for_selector("[data-series][data-drawn='1']")
    entries = [e for e in page.locator("ul.legend li").all_text_contents() if "the mean" in e]
    assert entries == [f'cmd="echo {n}": the mean of each commit\'s samples' for n in (1, 10, 20)]
    common = page.locator(".common").text_content() or ""
    assert common.startswith("every series: ") and "direction=lower" in common and "cmd=" not in common
    assert errors == []


def test_the_charts_are_usable_by_keyboard(server: str, browser: object, tracked_history: Path) -> None:
    tested = commits_tested(tracked_history)
    page = browser.new_page(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    page.goto(server + "/series?metric=command.seconds")
    page.wait_for_selector("[data-series][data-drawn='1']")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "skip to the content"
    for _ in range(12):  # the nav's links, the case filter, then the chart
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.series !== undefined"):
            break
    else:
        pytest.fail("Tab never reached the chart")
    hover = page.locator(".hover")
    page.keyboard.press("ArrowRight")
    assert (hover.text_content() or "").startswith(tested[0])
    page.keyboard.press("End")
    text = hover.text_content() or ""
    assert text.startswith(tested[-1]) and "±" in text and "sd of 5 samples" in text and "tested 20" in text
    assert "committed 20" in text  # the author and date the store kept
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/runs/\d+$"))
    assert tested[-1] in (page.locator("main").text_content() or "")

    page.goto(server + "/")
    page.wait_for_selector("[data-numbers][data-drawn='1']")
    page.focus("[data-numbers]")
    page.keyboard.press("End")
    assert (page.locator(".hover").first.text_content() or "").startswith(tested[-1])


def test_no_serious_or_critical_accessibility_violation(server: str, browser: object) -> None:
    """axe-core (web/package.json) in Chromium on one page of each kind, as web/pages.py
    audits every page of the demo's store in `make screenshots`."""
    pages = load_pages()
    paths = pages.one_of_each(pages.crawl(server))
    kinds = {urlsplit(path).path.split("/")[1] for path in paths}
    assert {"", "series", "regressions", "runs", "bisections", "compare"} <= kinds, paths
    # axe is added as a script the pages' Content-Security-Policy would refuse.
    context = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True)  # type: ignore[attr-defined]
    assert pages.audit(context.new_page(), server, paths) == []
    context.close()
