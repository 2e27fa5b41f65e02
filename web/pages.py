"""Every page of a store's dashboard in Chromium: an accessibility audit with axe-core,
and the screenshots of docs/images/.

    python web/pages.py --db track-demo.db audit [--one-of-each]   # exit 1 on a serious or critical violation
    python web/pages.py --db track-demo.db screenshots docs/images

`perfline serve` is started on the store; the pages are found by following every link
from the front page (the API and static files left out), plus a page that does not
exist. axe-core comes from npm (web/package.json) and Chromium is Debian's, driven by
Playwright. `make screenshots` builds the demo store and runs both.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx

HERE = Path(__file__).resolve().parent
AXE = HERE / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM = "/usr/bin/chromium"
# The pages of docs/images/: file name, path (None: found on the front page), height.
SHOTS = (("dashboard-front.png", "/", 900), ("dashboard-series.png", "/series?metric=command.seconds", 760),
         ("dashboard-regression.png", "/regressions/1", 820), ("dashboard-bisection.png", "/bisections/1", 700),
         ("dashboard-compare.png", "/compare?a=3&b=4", 760))
BLOCKING = ("serious", "critical")


@contextmanager
def served(db: Path, tokens: Path | None = None) -> Iterator[str]:
    """`perfline serve` on the store (with a token file if given) until the block ends;
    its URL. RuntimeError when it does not answer within a minute."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "perfline", "--db", str(db), "serve", "--port", str(port)]
    server = subprocess.Popen(command + (["--token-file", str(tokens)] if tokens else []), stderr=subprocess.PIPE,
                              text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/api/trackers", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(f"perfline serve did not start on {db}: {server.communicate()[1].strip()}")
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def settle(page: Any) -> None:
    """Wait until the page's charts are drawn (each sets data-drawn, or holds the text
    of why not)."""
    page.wait_for_load_state("load")
    page.wait_for_function("[...document.querySelectorAll('[data-series], [data-numbers]')]"
                           ".every(e => e.dataset.drawn === '1' || (e.childElementCount === 0 && e.textContent))", timeout=30_000)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [v for k, v in attrs if tag == "a" and k == "href" and v]


def crawl(base: str) -> list[str]:
    """Every page reachable from the front page by its links, and a missing one."""
    seen: list[str] = []
    queue = ["/", "/runs/999999"]
    with httpx.Client(base_url=base, timeout=60) as client:
        while queue:
            path = queue.pop(0)
            if path in seen:
                continue
            seen.append(path)
            links = _Links()
            links.feed(client.get(path).text)
            for href in links.hrefs:
                parts = urlsplit(urljoin(base + path, href))
                if parts.netloc == urlsplit(base).netloc and not parts.path.startswith(("/api/", "/static/")):
                    queue.append(parts.path + (f"?{parts.query}" if parts.query else ""))
    return seen


def one_of_each(paths: list[str]) -> list[str]:
    """The first page of each kind: the same route with another id or filter is the
    same template drawn with other data."""
    kinds: dict[str, str] = {}
    for path in paths:
        parts = urlsplit(path)
        route = re.sub(r"/\d+", "/N", parts.path) + ("?" + ",".join(sorted(parse_qs(parts.query))) if parts.query else "")
        kinds.setdefault(route, path)
    return list(kinds.values())


def audit(page: Any, base: str, paths: list[str]) -> list[str]:
    """axe-core on each page once its charts are drawn: the serious and critical
    violations, one line each."""
    found = []
    for path in paths:
        page.goto(base + path)
        settle(page)
        page.add_script_tag(path=str(AXE))
        result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
        for v in result["violations"]:
            if v["impact"] in BLOCKING:
                where = ", ".join(" ".join(node["target"]) for node in v["nodes"][:3])
                found.append(f"{path}: {v['impact']} {v['id']}: {v['help']} ({len(v['nodes'])} element(s): {where})")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, required=True, help="the store (an SQLite file)")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("audit", help="axe-core on every page")
    check.add_argument("--one-of-each", action="store_true", help="one page of each kind (the tests' quick audit)")
    shots = sub.add_parser("screenshots", help="docs/images/ anew")
    shots.add_argument("out", type=Path)
    args = parser.parse_args()
    if not args.db.is_file():
        print(f"error: {args.db}: no such store (make it with examples/track/demo.sh)", file=sys.stderr)
        return 2
    try:
        return _run(args)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from playwright.sync_api import sync_playwright

    with served(args.db) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        # axe is added as a script the page's Content-Security-Policy would refuse.
        context = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True)
        page = context.new_page()
        if args.command == "audit":
            paths = crawl(base)
            if args.one_of_each:
                paths = one_of_each(paths)
            found = audit(page, base, paths)
            print("\n".join(found) if found else f"axe-core {axe_version()}: no serious or critical violation "
                  f"on {len(paths)} pages")
            return 1 if found else 0
        args.out.mkdir(parents=True, exist_ok=True)
        for name, path, height in SHOTS:
            page.set_viewport_size({"width": 1200, "height": height})
            page.goto(base + path)
            settle(page)
            page.screenshot(path=str(args.out / name))
            print(f"{args.out / name}: {path}")
        browser.close()
    return 0


def axe_version() -> str:
    return str(json.loads((AXE.parent / "package.json").read_text())["version"])


if __name__ == "__main__":
    raise SystemExit(main())
