"""Evaluate perfline's change-point detector against baselines, side by side.

    .venv/bin/python bench/changepoint_eval.py [--quick]

Datasets:
- TCPD: the univariate evaluation series of the Turing Change Point Dataset found under
  ../shared/data/tcpd (read in place, never copied), normalized as TCPDBench does, and
  scored with TCPDBench's F1 (margin 5, precision against the union of the annotators,
  recall averaged over them, index 0 counted as a change point).
- synthetic: performance-like series from a seeded generator (1-3 % noise that is
  normal, Student-t, lognormal or bimodal; AR(1); outliers; steps of 2-10 %; 50-2000
  points, some with repetitions per point; a third without any change), scored with the
  same F1 against the true change points.

"FA/1000" counts detections farther than the margin from every true (or annotated)
change point, per 1000 points. "ms/series" is the detector's own CPU time per series
(process time: on a shared machine the wall clock measures the other tenants' load more
than the work), averaged over the dataset; a baseline's is measured in its own process,
after its input is an array, perfline's from the lists of repetitions its callers pass. "CI cov" is, of the true steps of known size that a change point matched, the share
whose 95% interval covers the true change (perfline only: the baselines give no interval).
Last, two 10,000-point series (five steps in t noise; one 3% step in 1% noise, the issue's
case) are timed for every method the issue names (best of --timing-runs, not for the extra
rows below), against the issue's targets (perfline <= 3 ms, >= 20x faster than Otava).

Baselines (bench/changepoint_baselines.py): the zero detector, ruptures Pelt and Binseg
with a BIC penalty, apache-otava and signal-processing-algorithms' E-Divisive with
their defaults. The last two cannot be installed next to perfline (conflicting numpy
pins) and run from their own venvs: bench/setup_changepoint_baselines.sh.

--rates adds perfline at looser false-alarm rates; --trend-reference adds the
piecewise-linear detector of bench/changepoint_trend.py, alone and switched to from
perfline where perfline's segments trend (what modelling trends buys on TCPD and costs
on performance series; docs/statistics.md, "Where TCPD is lost").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import changepoint_baselines as baselines
import changepoint_trend
import numpy as np

from perfline.stats.changepoint import detect

REPO = Path(__file__).resolve().parent.parent
MARGIN = 5

# How readily --trend-reference switches from perfline's levels to lines (Kendall level).
SWITCH_LEVELS = (0.001, 0.05, 0.2)

# TCPDBench's published default-setting F1 (analysis/output/scores/default_f1_scores.json)
# averaged over the 26 univariate evaluation series present here; binseg and pelt
# failed on uk_coal_employ (missing values), their means are over the other 25.
PUBLISHED_TCPD_F1 = {"binseg": 0.690, "pelt": 0.684, "bocpd": 0.653, "zero": 0.642, "ecp": 0.593}


# --- scoring: TCPDBench's metrics.py (van den Burg & Williams, 2020) -------------------


def true_positives(truth: set[int], predicted: set[int], margin: int = MARGIN) -> set[int]:
    """True change points matched by a prediction within the margin, each used once."""
    unused = set(predicted)
    matched: set[int] = set()
    for tau in truth:
        close = sorted((abs(tau - x), x) for x in unused if abs(tau - x) <= margin)
        if close:
            matched.add(tau)
            unused.remove(close[0][1])
    return matched


def f_measure(annotations: dict[str, list[int]], predicted: Sequence[int], margin: int = MARGIN) -> float:
    """F1 with precision against the union of annotators and recall averaged over them."""
    per_annotator = [set(cps) | {0} for cps in annotations.values()]
    union = set().union(*per_annotator)
    found = set(predicted) | {0}
    precision = len(true_positives(union, found, margin)) / len(found)
    recall = sum(len(true_positives(t, found, margin)) / len(t) for t in per_annotator) / len(per_annotator)
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def false_alarms(annotations: dict[str, list[int]], predicted: Sequence[int], margin: int = MARGIN) -> int:
    truth = set().union(*(set(cps) for cps in annotations.values())) | {0}
    return sum(1 for x in set(predicted) - {0} if all(abs(x - t) > margin for t in truth))


# --- datasets ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    points: list[list[float]]  # repetitions per point; NaN marks a missing point
    annotations: dict[str, list[int]]
    # The true change in % at each true change point, where it is known (synthetic).
    steps: dict[int, float] = field(default_factory=dict)

    def values(self) -> np.ndarray:
        """One value per point for detectors that take no repetitions: the median."""
        return np.array([np.median(p) for p in self.points])


def load_tcpd(root: Path) -> list[Case]:
    annotations = json.loads((root / "annotations.json").read_text())
    cases = []
    for name in sorted(annotations):
        path = root / name / f"{name}.json"
        # Quality-control series only vetted the annotators; TCPDBench leaves them out.
        if not path.exists() or name.startswith("quality_control"):
            continue
        data = json.loads(path.read_text())
        if data["n_dim"] != 1:
            continue
        raw = np.array([np.nan if v is None else v for v in data["series"][0]["raw"]], dtype=float)
        # TCPDBench normalizes every series before any method sees it.
        values = (raw - np.nanmean(raw)) / np.nanstd(raw, ddof=1)
        cases.append(Case(name, [[v] for v in values], annotations[name]))
    return cases


def _noise(rng: np.random.Generator, kind: str, size: int) -> np.ndarray:
    """Zero-mean, unit-variance noise of the given shape."""
    if kind == "normal":
        return rng.standard_normal(size)
    if kind == "student-t":
        return rng.standard_t(3, size) / math.sqrt(3.0)
    if kind == "lognormal":
        s = 0.5
        x = rng.lognormal(0.0, s, size)
        return (x - math.exp(s * s / 2)) / math.sqrt((math.exp(s * s) - 1) * math.exp(s * s))
    # bimodal: a second mode two units up taken 30 % of the time, like a cache that
    # sometimes misses.
    x = (rng.random(size) < 0.3) * 2.0 - 0.6 + 0.5 * rng.standard_normal(size)
    return x / math.sqrt(0.21 * 4.0 + 0.25)


def _ar1(rng: np.random.Generator, kind: str, size: int, phi: float) -> np.ndarray:
    innovations = _noise(rng, kind, size) * math.sqrt(1.0 - phi * phi)
    out = np.empty(size)
    previous = _noise(rng, kind, 1)[0]
    for i, e in enumerate(innovations):
        previous = phi * previous + e
        out[i] = previous
    return out


def _change_points(rng: np.random.Generator, n: int) -> list[int]:
    if rng.random() < 1 / 3:
        return []
    wanted = int(rng.integers(1, min(5, n // 40) + 1))
    chosen: list[int] = []
    for candidate in rng.permutation(np.arange(10, n - 10)):
        if all(abs(candidate - c) >= 20 for c in chosen):
            chosen.append(int(candidate))
        if len(chosen) == wanted:
            break
    return sorted(chosen)


def synthetic_case(rng: np.random.Generator, number: int) -> Case:
    n = int(rng.choice([50, 100, 200, 500, 1000, 2000]))
    kind = str(rng.choice(["normal", "student-t", "lognormal", "bimodal"]))
    sd = rng.uniform(0.01, 0.03)
    phi = 0.0 if rng.random() < 0.5 else rng.uniform(0.1, 0.4)
    outlier_rate = 0.01 if rng.random() < 0.5 else 0.0
    repetitions = int(rng.integers(3, 6)) if rng.random() < 0.25 else 1
    cps = _change_points(rng, n)
    level = np.full(n, 100.0)
    steps = {}
    for cp in cps:
        step = rng.choice([-1.0, 1.0]) * rng.uniform(0.02, 0.10)
        level[cp:] *= 1.0 + step
        steps[cp] = 100.0 * float(step)
    if repetitions == 1:
        samples = level[:, None] * (1.0 + sd * _ar1(rng, kind, n, phi))[:, None]
    else:
        # Between-run noise (boot, layout) carries the autocorrelation; repetitions
        # within a run add their own.
        between = 0.6 * sd * _ar1(rng, kind, n, phi)
        within = 0.8 * sd * _noise(rng, kind, n * repetitions).reshape(n, repetitions)
        samples = level[:, None] * (1.0 + between[:, None] + within)
    spikes = rng.random(samples.shape) < outlier_rate
    samples[spikes] *= 1.0 + rng.uniform(0.1, 0.5, int(spikes.sum()))
    label = f"s{number:03d}-{kind}-n{n}-r{repetitions}-phi{phi:.1f}-k{len(cps)}"
    return Case(label, samples.tolist(), {"truth": cps}, steps)


def synthetic(seed: int, count: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    return [synthetic_case(rng, i) for i in range(count)]


def long_series(seed: int, n: int = 10_000) -> Case:
    """A 10,000-point series with a handful of steps, for timing."""
    rng = np.random.default_rng(seed)
    cps = [1500, 3000, 5200, 7000, 8800]
    level = np.full(n, 100.0)
    for cp, step in zip(cps, [0.05, -0.03, 0.04, -0.06, 0.03], strict=True):
        level[cp:] *= 1.0 + step
    values = level * (1.0 + 0.02 * _ar1(rng, "student-t", n, 0.2))
    return Case("5 steps, t noise, AR 0.2", [[v] for v in values], {"truth": cps})


def one_step_series(seed: int, n: int = 10_000) -> Case:
    """The issue's timing case: one 3% step (at 60%) in 1% normal noise."""
    rng = np.random.default_rng(seed)
    at = int(0.6 * n)
    values = 100.0 * np.where(np.arange(n) >= at, 1.03, 1.0) * (1.0 + 0.01 * rng.standard_normal(n))
    return Case("one 3% step in 1% noise", [[v] for v in values], {"truth": [at]})


# --- methods -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    found: list[int]  # indexes of the change points, into the case's points
    seconds: float  # the detector's own time on the case
    # (index, low %, high %) of each change point's interval, from detectors that give one.
    intervals: list[tuple[int, float, float]] = field(default_factory=list)


Runner = Callable[[list[Case]], list[Outcome]]


@dataclass
class Method:
    name: str
    run: Runner | None
    unavailable: str = ""
    # Variants of a timed method, or references outside the list, are not timed
    # on the long series.
    timed: bool = True
    timed_run: Callable[[list[Case], float], list[Outcome]] | None = None


def _perfline(false_alarm_rate: float | None = None) -> Runner:
    """The detector at its default false-alarm rate, or at the given one, with its intervals."""
    detector = detect if false_alarm_rate is None else partial(detect, false_alarm_rate=false_alarm_rate)

    def run(cases: list[Case]) -> list[Outcome]:
        bounds: list[list[tuple[float, float]]] = []  # each case's intervals, in the order found

        def indexes(points: list[list[float]]) -> list[int]:
            changes = detector(points)
            bounds.append([c.ci_pct for c in changes])
            return [c.index for c in changes]

        outcomes = _timed(indexes)(cases)
        return [replace(o, intervals=[(i, low, high) for i, (low, high) in zip(o.found, b, strict=True)])
                for o, b in zip(outcomes, bounds, strict=True)]

    return run


def _timed(detector: Callable[[list[list[float]]], list[int]]) -> Runner:
    """Runs a detector that takes points with their repetitions, missing points left out."""

    def run(cases: list[Case]) -> list[Outcome]:
        results = []
        for case in cases:
            _, kept = _without_missing(case)
            points = [case.points[i] for i in kept]
            start = time.process_time()
            found = detector(points)
            results.append(Outcome(_remap(found, kept), time.process_time() - start))
        return results

    return run


def _without_missing(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """Values without missing points and the original index of each kept point."""
    values = case.values()
    kept = np.flatnonzero(np.isfinite(values))
    return values[kept], kept


def _remap(found: list[int], kept: np.ndarray) -> list[int]:
    return [int(kept[i]) for i in found if 0 <= i < len(kept)]


def _in_process(name: str) -> Runner:
    def run(cases: list[Case]) -> list[Outcome]:
        results = []
        for case in cases:
            values, kept = _without_missing(case)
            [outcome] = baselines.run_timed(name, [values.tolist()])
            results.append(Outcome(_remap(outcome["change_points"], kept), outcome["seconds"]))
        return results

    return run


def _in_venv(name: str, python: Path) -> Callable[[list[Case], float | None], list[Outcome]]:
    def run(cases: list[Case], timeout: float | None = None) -> list[Outcome]:
        prepared = [_without_missing(case) for case in cases]
        request = {"method": name, "series": [values.tolist() for values, _ in prepared]}
        output = subprocess.run(
            [str(python), str(Path(baselines.__file__))],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            check=True,
            timeout=timeout,
        ).stdout
        outcomes = json.loads(output)
        return [
            Outcome(_remap(o["change_points"], kept), o["seconds"])
            for o, (_, kept) in zip(outcomes, prepared, strict=True)
        ]

    return run


def _venv_method(label: str, name: str, python: Path, package: str) -> Method:
    if python.exists():
        run = _in_venv(name, python)
        return Method(label, run, timed_run=run)
    return Method(label, None, f"{package}: no venv at {python} (bench/setup_changepoint_baselines.sh)")


def _ruptures_method(label: str, name: str) -> Method:
    if importlib.util.find_spec("ruptures") is None:
        return Method(label, None, "ruptures not installed (pip install -e .[eval])")
    return Method(label, _in_process(name))


def methods(args: argparse.Namespace) -> list[Method]:
    looser = [Method(f"perfline at {rate:g}", _perfline(rate), timed=False) for rate in args.rates]
    trend: dict[str, Callable[[list[list[float]]], list[int]]] = {"linear": changepoint_trend.linear}
    for level in SWITCH_LEVELS:
        trend[f"switch to linear {level:g}"] = partial(changepoint_trend.switching, level=level)
    reference = [Method(name, _timed(d), timed=False) for name, d in trend.items()] if args.trend_reference else []
    return [
        Method("perfline", _perfline()),
        *looser,
        _venv_method("otava", "otava", args.otava_python, "apache-otava"),
        _venv_method("e-divisive", "edivisive", args.edivisive_python, "signal-processing-algorithms"),
        _ruptures_method("ruptures Pelt BIC", "ruptures-pelt"),
        _ruptures_method("ruptures Binseg BIC", "ruptures-binseg"),
        Method("zero", _in_process("zero")),
        *reference,
    ]


# --- evaluation --------------------------------------------------------------------------


@dataclass
class Score:
    f1: float = math.nan
    false_alarms_per_1000: float = math.nan
    ms_per_series: float = math.nan
    # Of the true steps found (within the margin), the share whose interval covers the
    # true change; nan where the detector gives no intervals or the truth has no sizes.
    coverage: float = math.nan
    covered: int = 0
    matched: int = 0
    per_case: dict[str, list[int]] = field(default_factory=dict)


def interval_coverage(case: Case, outcome: Outcome) -> tuple[int, int]:
    """(covered, matched): true steps matched within the margin by a change point, each
    change point used once as in the F1, and how many of their intervals hold the truth."""
    covered = matched = 0
    unused = {index: (low, high) for index, low, high in outcome.intervals}
    for tau, pct in sorted(case.steps.items()):
        close = sorted((abs(tau - x), x) for x in unused if abs(tau - x) <= MARGIN)
        if close:
            low, high = unused.pop(close[0][1])
            matched += 1
            covered += low <= pct <= high
    return covered, matched


def evaluate(method: Method, cases: list[Case]) -> Score:
    if method.run is None:
        return Score()
    outcomes = method.run(cases)
    pairs = list(zip(cases, outcomes, strict=True))
    f1 = [f_measure(c.annotations, o.found) for c, o in pairs]
    alarms = sum(false_alarms(c.annotations, o.found) for c, o in pairs)
    points = sum(len(c.points) for c in cases)
    covered, matched = (sum(counts) for counts in zip(*(interval_coverage(c, o) for c, o in pairs), strict=True))
    return Score(
        f1=float(np.mean(f1)),
        false_alarms_per_1000=1000.0 * alarms / points,
        ms_per_series=1000.0 * sum(o.seconds for o in outcomes) / len(outcomes),
        coverage=covered / matched if matched else math.nan,
        covered=covered,
        matched=matched,
        per_case={c.name: o.found for c, o in pairs},
    )


def _cell(value: float, digits: int) -> str:
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


def print_table(rows: list[tuple[Method, dict[str, Score]]], datasets: list[str]) -> None:
    header = f"{'method':<22}" + "".join(f"| {d:<38}" for d in datasets)
    sub = f"{'':<22}" + "".join(f"| {'F1':>6} {'FA/1000':>8} {'ms/series':>10} {'CI cov':>7}  " for _ in datasets)
    print(header)
    print(sub)
    print("-" * len(sub))
    for method, scores in rows:
        line = f"{method.name:<22}"
        for d in datasets:
            s = scores[d]
            coverage = _cell(100.0 * s.coverage, 1)
            line += (f"| {_cell(s.f1, 3):>6} {_cell(s.false_alarms_per_1000, 2):>8} {_cell(s.ms_per_series, 2):>10} "
                     f"{coverage:>7}  ")
        print(line)
    for method, scores in rows:
        for d in datasets:
            if not math.isnan(scores[d].coverage):
                print(f"  {method.name} on {d}: the 95% interval covers the true step in {scores[d].covered} of "
                      f"the {scores[d].matched} steps found ({100.0 * scores[d].coverage:.1f}%; target >= 90%)")
    for method, _ in rows:
        if method.unavailable:
            print(f"  {method.name}: not run: {method.unavailable}")


# The speed targets on the long series.
TARGET_MS = 3.0
TARGET_SPEEDUP = 20.0


def print_timing(all_methods: list[Method], case: Case, limit: float, runs: int) -> None:
    """Best of `runs` runs on one long series; a baseline in its own venv gets `limit` s for all."""
    print(f"\n{len(case.points):,}-point series ({case.name}), best of {runs} runs:")
    times: dict[str, float] = {}
    for method in all_methods:
        if method.run is None or method.name == "zero" or not method.timed:
            continue
        try:
            outcomes = method.timed_run([case] * runs, limit) if method.timed_run else method.run([case] * runs)
        except subprocess.TimeoutExpired:
            print(f"  {method.name:<22} not done after {limit:.0f} s ({runs} runs)")
            continue
        times[method.name] = min(o.seconds for o in outcomes)
        f1 = f_measure(case.annotations, outcomes[0].found)
        print(f"  {method.name:<22} {1000.0 * times[method.name]:10.2f} ms  F1 {f1:.3f}")
    if "perfline" in times:
        ms = 1000.0 * times["perfline"]
        print(f"  perfline: {ms:.2f} ms per series (target <= {TARGET_MS:g} ms): {'met' if ms <= TARGET_MS else 'MISSED'}")
    if "otava" in times and "perfline" in times:
        ratio = times["otava"] / times["perfline"]
        print(f"  perfline is {ratio:.0f}x faster than otava (target >= {TARGET_SPEEDUP:g}x): "
              f"{'met' if ratio >= TARGET_SPEEDUP else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="40 synthetic series instead of 200")
    parser.add_argument("--limit", type=float, help="seconds for a baseline on the long series (60 quick, else 600)")
    parser.add_argument("--timing-runs", type=int, default=7, help="runs on the long series; the best is printed")
    parser.add_argument("--tcpd", type=Path, default=REPO.parent / "shared" / "data" / "tcpd")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--otava-python", type=Path, default=REPO / ".venv/eval/otava/bin/python")
    parser.add_argument("--edivisive-python", type=Path, default=REPO / ".venv/eval/edivisive/bin/python")
    parser.add_argument("--only", nargs="*", help="run only these methods")
    parser.add_argument("--details", action="store_true", help="print per-series F1 of perfline")
    parser.add_argument(
        "--rates", nargs="*", type=float, default=[], help="also run perfline at these (looser) false-alarm rates"
    )
    parser.add_argument(
        "--trend-reference",
        action="store_true",
        help="also run a calibrated piecewise-linear detector, alone and switched to: what modelling trends buys",
    )
    args = parser.parse_args()

    datasets = {
        "TCPD (26 univariate)": load_tcpd(args.tcpd),
        f"synthetic ({40 if args.quick else 200} series)": synthetic(args.seed, 40 if args.quick else 200),
    }
    all_methods = [m for m in methods(args) if not args.only or m.name in args.only]
    rows = []
    for method in all_methods:
        print(f"running {method.name} ...", file=sys.stderr, flush=True)
        rows.append((method, {name: evaluate(method, cases) for name, cases in datasets.items()}))
    print()
    print_table(rows, list(datasets))
    published = ", ".join(f"{k} {v:.3f}" for k, v in PUBLISHED_TCPD_F1.items())
    print(f"  TCPDBench published default F1 on the same TCPD series: {published}")
    if args.details:
        for (method, scores) in rows[:1]:
            for name, cases in datasets.items():
                for case in cases:
                    found = scores[name].per_case[case.name]
                    print(f"  {case.name:<40} F1 {f_measure(case.annotations, found):.3f} found {found}")
    for case in (long_series(args.seed), one_step_series(args.seed)):
        print_timing(all_methods, case, args.limit or (60.0 if args.quick else 600.0), args.timing_runs)


if __name__ == "__main__":
    main()
