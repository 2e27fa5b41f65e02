"""The dashboard's speed on a big store, against issue 15's targets.

    .venv/bin/python bench/web_bench.py [--samples 1000000] [--series 2000] [--keep DIR]

Builds an SQLite store of `--samples` benchmark samples in `--series` series (20 metrics
x N cases, 5 samples a run) plus one series of 10,000 points, and 500 regression
records; starts `perfline serve` on it and measures (each the best of 5, after one
warm-up request):

- `/api/series` of the 10,000-point series, server time (target < 100 ms);
- `/` and `/regressions` (target < 200 ms each);
- the series page in Chromium (Debian's, through Playwright): the moment the chart was
  drawn, from the page's own performance clock (target < 1 s);
- JavaScript and CSS a page ships, gzip-compressed (target < 150 kB).
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np

from perfline.store import Store
from perfline.web.assets import vendor_dir

ROOT = Path(__file__).resolve().parents[1]
METRICS = 20
PER_RUN = 5
LONG_POINTS = 10_000
LONG_METRIC = "long.seconds"


def build(db: Path, samples: int, series: int) -> None:
    Store.open(str(db)).close()  # the schema
    rng = np.random.default_rng(1)
    cases = series // METRICS
    runs_per_series = samples // (series * PER_RUN)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with sqlite3.connect(db) as con:
        con.executemany("INSERT INTO metrics (name, unit, direction, description) VALUES (?, 's', 'lower', '')",
                        [(f"m{m}.seconds",) for m in range(METRICS)] + [(LONG_METRIC,)])
        run_rows, sample_rows = [], []
        run_id = 0

        def run(case: str, metric: str, when: datetime, values: np.ndarray, commit: str) -> None:
            nonlocal run_id
            run_id += 1
            run_rows.append((run_id, "bench", "bench", case, "{}", "{}", "[]", "local", None, commit, "host",
                             "machine0", "6.1.0", "{}", None, "{}", "completed", None, None, len(values), 0,
                             when.isoformat(sep=" "), when.isoformat(sep=" "), 1, "boot", "bench"))
            sample_rows.extend((run_id, rep, metric, "benchmark", float(v), when.isoformat(sep=" "))
                               for rep, v in enumerate(values))

        for m in range(METRICS):
            for c in range(cases):
                for r in range(runs_per_series):
                    level = 1.0 if r < runs_per_series // 2 else 1.05
                    run(f"case={c}", f"m{m}.seconds", start + timedelta(hours=r),
                        level * rng.lognormal(0, 0.02, PER_RUN), f"{r:040x}")
        for r in range(LONG_POINTS):
            run("case=long", LONG_METRIC, start + timedelta(minutes=r), rng.lognormal(0, 0.02, 1), f"{r:040x}")
        con.executemany("INSERT INTO runs (id, job, benchmark, case_key, params, tunables, monitors, target, label, "
                        "kernel_commit, hostname, machine_id, kernel_release, fingerprint, config_hash, settings, "
                        "status, error, output_tail, repeat, warmup, started_at, finished_at, pid, boot_id, "
                        "perfline_version) VALUES (" + ",".join("?" * 26) + ")", run_rows)
        con.executemany("INSERT INTO samples (run_id, repetition, metric, source, value, taken_at) "
                        "VALUES (?, ?, ?, ?, ?, ?)", sample_rows)
        regressions = []
        for i in range(500):
            m, c = i % METRICS, (i // METRICS) % cases
            first = (m * cases + c) * runs_per_series + 1
            regressions.append((f"m{m}.seconds", "bench", f"case={c}", "machine0", first + runs_per_series // 2 - 1,
                                first + runs_per_series // 2, "regression", 5.0, 3.0, 7.0, 4.0, "new",
                                start.isoformat(sep=" "), start.isoformat(sep=" "), "untriaged"))
        con.executemany("INSERT INTO regressions (metric, benchmark, case_key, machine_id, before_run_id, "
                        "after_run_id, kind, change_pct, ci_low_pct, ci_high_pct, strength, status, detected_at, "
                        "updated_at, triage) VALUES (" + ",".join("?" * 15) + ")", regressions)
    print(f"store: {len(sample_rows):,} samples, {run_id:,} runs, {METRICS * cases + 1} series, "
          f"{len(regressions)} regressions, {db.stat().st_size / 2**20:.0f} MiB")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(client: httpx.Client, url: str) -> float:
    client.get(url).raise_for_status()
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        client.get(url).raise_for_status()
        best = min(best, time.perf_counter() - started)
    return 1000 * best


def row(what: str, value: float, target: float, unit: str) -> None:
    print(f"  {what:<46} {value:8.1f} {unit:<3} target < {target:g} {unit}  {'ok' if value < target else 'MISSED'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--series", type=int, default=2000)
    parser.add_argument("--keep", type=Path, help="build the store here and keep it")
    args = parser.parse_args()
    where = args.keep or Path(tempfile.mkdtemp(prefix="perfline-web-bench-"))
    where.mkdir(parents=True, exist_ok=True)
    db = where / "db"
    if not db.exists():
        started = time.perf_counter()
        build(db, args.samples, args.series)
        print(f"built in {time.perf_counter() - started:.0f} s")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "perfline", "--db", str(db), "serve", "--port", str(port)],
                              stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            for _ in range(300):
                try:
                    client.get("/api/trackers")
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
            long = client.get(f"/api/series?metric={LONG_METRIC}&max_points=100000").json()["series"][0]
            print(f"measured on {base} (best of 5):")
            row(f"/api/series, {long['points_total']:,}-point series (all of it)",
                timed(client, f"/api/series?metric={LONG_METRIC}&max_points=100000"), 100, "ms")
            row("/api/series, the same downsampled to 2,000 points", timed(client, f"/api/series?metric={LONG_METRIC}"),
                100, "ms")
            row("/ (trackers and machines)", timed(client, "/"), 200, "ms")
            row("/regressions (500 records, grouped)", timed(client, "/regressions"), 200, "ms")
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            best = float("inf")
            for _ in range(5):
                page = browser.new_page()
                page.goto(f"{base}/series?metric={LONG_METRIC}")
                page.wait_for_selector("[data-series][data-drawn='1']", timeout=30_000)
                best = min(best, float(page.get_attribute("[data-series]", "data-drawn-at") or "inf"))
                page.close()
            browser.close()
        row("series page in Chromium: chart drawn", best, 1000, "ms")
        vendor = vendor_dir()
        shipped = [vendor / "uplot/dist/uPlot.iife.min.js", vendor / "uplot/dist/uPlot.min.css",
                   vendor / "htmx.org/dist/htmx.min.js", ROOT / "src/perfline/web/static/dashboard.js",
                   ROOT / "src/perfline/web/static/style.css"]
        row("JavaScript and CSS of a page, gzip", sum(len(gzip.compress(f.read_bytes())) for f in shipped) / 1024,
            150, "kB")
    finally:
        server.terminate()
        server.wait()
        if args.keep is None:
            shutil.rmtree(where, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
