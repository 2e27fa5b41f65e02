"""The dashboard: FastAPI routes for the pages (Jinja2, escaped) and the JSON API.

Reads the store; the one write is a regression's triage, which needs a bearer token.
Nothing here runs a command or reads a file outside the store and the static assets.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Form, Header, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint

from perfline.analysis.comparison import compare_sides, sides_by_label, sides_from_runs
from perfline.report import regression_report
from perfline.report.comparison_table import comparison_json
from perfline.report.regressions import regression_json
from perfline.store import Regression, RunNotFound, Store
from perfline.store.bisections import BisectionNotFound
from perfline.store.dashboard import TRIAGE, TriageError
from perfline.web.auth import Tokens
from perfline.web.series_data import DEFAULT_MAX_POINTS, series_json

HERE = Path(__file__).parent
# No inline script or style anywhere: a stored string that gets past escaping still
# cannot run. Charts draw on canvas; images are the inline PNGs of reports.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


class _SecurityHeaders(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response


def create_app(store: Store, tokens: Tokens, vendor: Path) -> FastAPI:
    """`vendor`: the npm packages' directory (uPlot, htmx), served under /static/vendor."""
    app = FastAPI(title="perfline", description="Performance history, regressions and their triage.",
                  docs_url="/api/docs", openapi_url="/api/openapi.json", redoc_url=None)
    app.add_middleware(_SecurityHeaders)
    app.mount("/static/vendor", StaticFiles(directory=vendor), name="vendor")
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    pages = Jinja2Templates(directory=HERE / "templates")

    def page(request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
        return pages.TemplateResponse(request, name, {"triage_states": TRIAGE, **context}, status_code=code)

    def regression_or_404(regression_id: int) -> Regression:
        try:
            return store.get_regression(regression_id)
        except RunNotFound:
            raise HTTPException(404, f"no regression {regression_id}") from None

    # ---- pages --------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index(request: Request) -> HTMLResponse:
        return page(request, "index.html", trackers=_trackers(store), machines=store.machines())

    @app.get("/series", response_class=HTMLResponse, include_in_schema=False)
    def series_page(request: Request, metric: str, case: str | None = None, machine: str | None = None
                    ) -> HTMLResponse:
        return page(request, "series.html", metric=metric, case=case, machine=machine,
                    cases=store.metric_cases(metric), query=request.url.query)

    @app.get("/regressions", response_class=HTMLResponse, include_in_schema=False)
    def regressions_page(request: Request, status: str | None = None, tracker: str | None = None,
                         metric: str | None = None, machine: str | None = None) -> HTMLResponse:
        listed = _filtered(store, status, tracker, metric, machine)
        return page(request, "regressions.html", groups=_by_range(listed), status=status, tracker=tracker,
                    metric=metric, machine=machine)

    @app.get("/regressions/{regression_id}", response_class=HTMLResponse, include_in_schema=False)
    def regression_page(request: Request, regression_id: int) -> HTMLResponse:
        r = regression_or_404(regression_id)
        report = regression_report.build(store, r.id)
        return page(request, "regression.html", r=r, report=report, text=regression_report.text(report),
                    events=store.regression_events(r.id))

    @app.post("/regressions/{regression_id}/triage", include_in_schema=False)
    def triage_form(request: Request, regression_id: int, token: Annotated[str, Form()] = "",
                    triage: Annotated[str, Form()] = "", owner: Annotated[str, Form()] = "",
                    note: Annotated[str, Form()] = "", due: Annotated[str, Form()] = "") -> Response:
        who = tokens.who(f"Bearer {token}")
        if who is None:
            return page(request, "error.html", code=401, message="a valid token is needed to triage")
        regression_or_404(regression_id)
        changes = {"triage": triage or None, "owner": owner, "note": note, "due": due or None}
        try:
            store.set_triage(regression_id, who, {k: v for k, v in changes.items() if k != "triage" or v})
        except TriageError as exc:
            return page(request, "error.html", code=400, message=str(exc))
        return RedirectResponse(f"/regressions/{regression_id}", status_code=303)

    @app.get("/runs", response_class=HTMLResponse, include_in_schema=False)
    def runs_page(request: Request, limit: int = 100) -> HTMLResponse:
        return page(request, "runs.html", runs=store.list_runs(min(limit, 1000)))

    @app.get("/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
    def run_page(request: Request, run_id: int) -> HTMLResponse:
        try:
            run = store.get_run(run_id)
        except RunNotFound:
            raise HTTPException(404, f"no run {run_id}") from None
        return page(request, "run.html", run=run, summary=_summary(run))

    @app.get("/compare", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(request: Request, a: int | None = None, b: int | None = None, a_label: str | None = None,
                     b_label: str | None = None) -> HTMLResponse:
        return page(request, "compare.html", cases=_compare(store, a, b, a_label, b_label))

    @app.get("/bisections/{bisection_id}", response_class=HTMLResponse, include_in_schema=False)
    def bisection_page(request: Request, bisection_id: int) -> HTMLResponse:
        return page(request, "bisection.html", **_bisection(store, bisection_id))

    # ---- API ----------------------------------------------------------------------

    @app.get("/api/trackers")
    def api_trackers() -> list[dict[str, Any]]:
        """Every tracker: its state and its daily number per tested commit."""
        return [t.to_json() for t in _trackers(store)]

    @app.get("/api/series")
    def api_series(metric: str, case: str | None = None, machine: str | None = None, since: datetime | None = None,
                   max_points: Annotated[int, Query(ge=10, le=100_000)] = DEFAULT_MAX_POINTS) -> Response:
        """One metric's series (every case and machine unless given), downsampled to max_points:
        per point its commit (or run), subject, runs, mean, min, max, n; the regressions'
        change points with their culprits."""
        # Serialized directly: FastAPI's encoder walks 10,000 point objects ten times slower.
        return Response(json.dumps(series_json(store, metric, case, machine, since, max_points)),
                        media_type="application/json")

    @app.get("/api/runs")
    def api_runs(limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[dict[str, Any]]:
        return [_jsonable(asdict(run)) for run in store.list_runs(limit)]

    @app.get("/api/runs/{run_id}")
    def api_run(run_id: int) -> dict[str, Any]:
        try:
            run = store.get_run(run_id)
        except RunNotFound:
            raise HTTPException(404, f"no run {run_id}") from None
        return _jsonable({**asdict(run.info), "params": run.params, "tunables": run.tunables,
                          "settings": run.settings, "fingerprint": run.fingerprint, "summary": _summary(run)})

    @app.get("/api/regressions")
    def api_regressions(status: str | None = None, tracker: str | None = None, metric: str | None = None,
                        machine: str | None = None) -> list[dict[str, Any]]:
        return [_regression_json(r) for r in _filtered(store, status, tracker, metric, machine)]

    @app.get("/api/regressions/{regression_id}")
    def api_regression(regression_id: int) -> dict[str, Any]:
        r = regression_or_404(regression_id)
        return {**_regression_json(r), "history": [_jsonable(asdict(e)) for e in store.regression_events(r.id)]}

    @app.post("/api/regressions/{regression_id}")
    def api_triage(regression_id: int, changes: dict[str, str | None],
                   authorization: Annotated[str | None, Header()] = None) -> dict[str, Any]:
        """Triage: any of triage (a state), owner, note, due (YYYY-MM-DD). Needs
        `Authorization: Bearer TOKEN`; without a valid one, 401 and nothing changes."""
        who = tokens.who(authorization)
        if who is None:
            raise HTTPException(401, "a valid bearer token is needed", headers={"WWW-Authenticate": "Bearer"})
        regression_or_404(regression_id)
        try:
            store.set_triage(regression_id, who, changes)
        except TriageError as exc:
            raise HTTPException(400, str(exc)) from None
        return api_regression(regression_id)

    @app.get("/api/bisections/{bisection_id}")
    def api_bisection(bisection_id: int) -> dict[str, Any]:
        found = _bisection(store, bisection_id)
        return _jsonable({"id": found["record"].id, "spec": asdict(found["record"].spec),
                          "status": found["record"].status, "result": found["record"].result,
                          "probes": found["probes"]})

    @app.exception_handler(404)
    def not_found(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": getattr(exc, "detail", "not found")}, status_code=404)
        return page(request, "error.html", code=404, message=str(getattr(exc, "detail", "not found")))

    return app


def _trackers(store: Store) -> list[Any]:
    from perfline.track.status import tracker_states

    names = [t.name for t in store.trackers()]
    try:
        return tracker_states(store, names, lambda _: None)
    except Exception:  # noqa: BLE001 - a tracker whose file or tree is gone still has numbers to show
        from perfline.report.tracking import TrackerState
        from perfline.track.judging import open_regressions

        return [TrackerState(t, None, 0, 0, len(open_regressions(store, t.name)), 0, store.daily_numbers(t.name))
                for t in store.trackers()]


def _filtered(store: Store, status: str | None, tracker: str | None, metric: str | None,
              machine: str | None) -> list[Regression]:
    return [r for r in store.regressions(status, tracker)
            if (metric is None or r.metric == metric) and (machine is None or r.machine_id == machine)]


def _by_range(listed: list[Regression]) -> list[dict[str, Any]]:
    """One group per commit range (a tracker's good..bad, else the runs around the change)
    with every metric that changed there: one change, one row, however many metrics."""
    groups: dict[tuple[Any, ...], list[Regression]] = defaultdict(list)
    for r in listed:
        key = (r.tracker, r.good, r.bad) if r.good and r.bad else (None, r.before_run_id, r.after_run_id)
        groups[key].append(r)
    out = []
    for (tracker, first, last), members in groups.items():
        culprit = next((r for r in members if r.culprit or r.culprits), None)
        out.append({"tracker": tracker, "range": f"{str(first)[:12]}..{str(last)[:12]}" if tracker or
                    isinstance(first, str) else f"runs {first}..{last}", "regressions": members,
                    "culprit": culprit.culprit if culprit else None,
                    "culprit_subject": culprit.culprit_subject if culprit else None,
                    "culprits": culprit.culprits if culprit else (),
                    "newest": max(r.updated_at for r in members)})
    return sorted(out, key=lambda g: g["newest"], reverse=True)


def _regression_json(r: Regression) -> dict[str, Any]:
    return {**regression_json(r), "triage": r.triage, "owner": r.owner, "due": r.due.isoformat() if r.due else None}


def _summary(run: Any) -> list[dict[str, Any]]:
    from perfline.stats.summary import summarize

    by_metric: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for s in run.samples:
        by_metric[(s.metric.name, s.metric.unit, s.source)].append(s.value)
    return [{"metric": name, "unit": unit, "source": source, **asdict(summarize(values))}
            for (name, unit, source), values in sorted(by_metric.items(), key=lambda kv: (kv[0][2] != "benchmark",
                                                                                          kv[0][0]))]


def _compare(store: Store, a: int | None, b: int | None, a_label: str | None, b_label: str | None
             ) -> list[dict[str, Any]]:
    try:
        if a is not None and b is not None:
            groups = [sides_from_runs(store, [a, b])]
        elif a_label and b_label:
            groups = sides_by_label(store, [a_label, b_label])
        else:
            return []
    except RunNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    return [comparison_json(compare_sides(sides, store)) for sides in groups]


def _bisection(store: Store, bisection_id: int) -> dict[str, Any]:
    from perfline.bisect.driver import trace

    try:
        record = store.bisection(bisection_id)
    except BisectionNotFound:
        raise HTTPException(404, f"no bisection {bisection_id}") from None
    probes = [{"n": i, "commit": record.spec.commits[step.sample.commit_index], "phase": step.sample.phase,
               "value": step.sample.value, "run": step.sample.run_id,
               "most_probable": record.spec.commits[step.culprit] if step.culprit is not None else None,
               "probability": None if step.culprit is None else step.probability}
              for i, step in enumerate(trace(store, record), start=1)]
    return {"record": record, "probes": probes}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value
