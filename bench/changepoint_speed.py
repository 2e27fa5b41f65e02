"""The change-point detector's CPU time on long series, against another version of it (issue 30).

    .venv/bin/python bench/changepoint_speed.py [--against OLD.py|CHECKOUT] [--runs 15]

Times stats.changepoint.detect, best of --runs, as its callers call it (lists of
repetitions), on: bench/changepoint_eval.py's 10,000-point series (five steps, t noise,
AR 0.2); the issue's case (one 3% step at 60% in 1% normal noise, four seeds); and
bench/store_scale.py's series (2,000 points of 5 lognormal repetitions, a 4% step at
70%), whose 100 make its `perfline detect` row. With --against, the same cases are timed
with that file's detect in the same process, case by case (e.g. main's version:
`git show main:src/perfline/stats/changepoint.py > /tmp/old.py`), so a shared machine's
load falls on both alike. Where the other version's C kernels differ from this tree's,
--against names a checkout of it instead (e.g. `git archive main | tar -x -C /tmp/old`,
then `make native` there): its changepoint.py runs with its own changepoint_kernels.py
and its own native/build/libchangepoint.so. CPU time: on a loaded machine the wall clock
measures the load.

With --datasets it also times the per-series mean (each series' best of 3) on TCPD and
on bench/changepoint_eval.py's synthetic set, the short series most detections are of.

With --against and --outputs, it checks first that the two give the same answers: on
TCPD, the synthetic sets of bench/changepoint_eval.py at seeds 2024, 1 and 2 (rates
0.001, 0.01 and 0.05), every scenario of bench/changepoint_calibration.py (--per-scenario
seeded series, rates 0.001 and 0.01) and the timed series, it prints how many series
get other change points and the largest differences of log p-value, change and bounds.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import changepoint_calibration as calibration
import changepoint_eval as evaluation
from changepoint_eval import long_series, one_step_series
from perfline.stats.changepoint import detect

Detector = Callable[..., list[Any]]
TARGET_MS = 3.0


def store_series(seed: int) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    level = np.where(np.arange(2000) < 1400, 1.0, 1.04)
    return (level[:, None] * rng.lognormal(0.0, 0.02, (2000, 5))).tolist()


def best_ms(detector: Detector, points: list[list[float]], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        detector(points)
        times.append(time.process_time() - start)
    return 1000.0 * min(times)


def _module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def load(path: Path) -> Detector:
    """detect of another changepoint.py, or of a checkout's with its own kernels and library."""
    if not path.is_dir():
        return _module("reference_changepoint", path).detect  # type: ignore[no-any-return]
    stats = path / "src" / "perfline" / "stats"
    kernels = _module("reference_changepoint_kernels", stats / "changepoint_kernels.py")
    library = path / "native" / "build" / "libchangepoint.so"
    if not library.exists():
        sys.exit(f"error: {library} not found: run `make native` in {path}")
    kernels.native_library = lambda name: path / "native" / "build" / f"lib{name}.so"
    # The checkout's changepoint.py imports its kernels by their package name: the
    # checkout's stand in for this tree's while it loads.
    own = sys.modules["perfline.stats.changepoint_kernels"]
    sys.modules["perfline.stats.changepoint_kernels"] = kernels
    try:
        return _module("reference_changepoint", stats / "changepoint.py").detect  # type: ignore[no-any-return]
    finally:
        sys.modules["perfline.stats.changepoint_kernels"] = own


def output_cases(per_scenario: int) -> list[tuple[list[list[float]], tuple[float, ...]]]:
    """Series and the false-alarm rates to detect them at, for --outputs."""
    rates = (0.001, 0.01, 0.05)
    cases = []
    for case in evaluation.load_tcpd(evaluation.REPO.parent / "shared" / "data" / "tcpd"):
        _, kept = evaluation._without_missing(case)
        cases.append(([case.points[i] for i in kept], rates))
    cases += [(case.points, rates) for seed in (2024, 1, 2) for case in evaluation.synthetic(seed, 200)]
    for scenario in calibration.null_scenarios() + calibration.step_scenarios():
        rng = np.random.default_rng(30)
        cases += [(scenario.draw(rng), calibration.RATES) for _ in range(per_scenario)]
    cases += [(long_series(2024).points, rates)] + [(one_step_series(s).points, rates) for s in range(4)]
    return cases + [(store_series(s), rates) for s in range(2)]


def compare_outputs(reference: Detector, per_scenario: int) -> None:
    series = other = found = 0
    log_p = change = bound = 0.0
    for points, rates in output_cases(per_scenario):
        series += 1
        for rate in rates:
            ours, theirs = detect(points, false_alarm_rate=rate), reference(points, false_alarm_rate=rate)
            if [c.index for c in ours] != [c.index for c in theirs]:
                other += 1
                continue
            for a, b in zip(ours, theirs, strict=True):
                found += 1
                log_p = max(log_p, math.log(10.0) * abs(a.strength - b.strength))
                change = max(change, abs(a.change_pct - b.change_pct))
                bound = max(bound, *(abs(x - y) for x, y in zip(a.ci_pct, b.ci_pct, strict=True)))
    print(f"outputs against {series} series: {other} detections with other change points; of {found} "
          f"change points the largest difference of log p {log_p:.2g}, of change {change:.2g} and of a "
          f"bound {bound:.2g} percentage points")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", type=Path,
                        help="another changepoint.py, or a checkout (built), to time beside this tree's")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--outputs", action="store_true", help="with --against: first compare the answers")
    parser.add_argument("--per-scenario", type=int, default=30, help="series a calibration scenario, for --outputs")
    parser.add_argument("--datasets", action="store_true", help="also the mean ms per series of TCPD and the synthetic set")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    reference = load(args.against) if args.against else None
    if reference is not None and args.outputs:
        compare_outputs(reference, args.per_scenario)
    cases = [("10k, 5 steps, t noise, AR 0.2 (eval)", long_series(2024).points)]
    cases += [(f"10k, one 3% step in 1% noise, seed {s}", one_step_series(s).points) for s in range(4)]
    cases += [(f"2,000 x 5 repetitions, 4% step, seed {s}", store_series(s)) for s in range(2)]
    print(f"CPU ms per series, best of {args.runs}; target <= {TARGET_MS:g} ms on the 10k series")
    print(f"  {'series':<42} {'this tree':>10}" + (f" {'against':>10} {'ratio':>6}" if reference else ""))
    for name, points in cases:
        ours = best_ms(detect, points, args.runs)
        line = f"  {name:<42} {ours:10.2f}"
        if reference is not None:
            theirs = best_ms(reference, points, args.runs)
            line += f" {theirs:10.2f} {theirs / ours:5.1f}x"
        print(line)
    if args.datasets:
        time_datasets(reference)


def time_datasets(reference: Detector | None) -> None:
    """Mean over the series of TCPD and of the synthetic set of each one's best of 3."""
    tcpd = []
    for case in evaluation.load_tcpd(evaluation.REPO.parent / "shared" / "data" / "tcpd"):
        _, kept = evaluation._without_missing(case)
        tcpd.append([case.points[i] for i in kept])
    for name, series in (("TCPD (26), mean per series", tcpd),
                         ("synthetic (200), mean per series", [c.points for c in evaluation.synthetic(2024, 200)])):
        ours = theirs = 0.0
        for points in series:  # the two interleaved, series by series
            ours += best_ms(detect, points, 3)
            if reference is not None:
                theirs += best_ms(reference, points, 3)
        line = f"  {name:<42} {ours / len(series):10.2f}"
        if reference is not None:
            line += f" {theirs / len(series):10.2f} {theirs / ours:5.1f}x"
        print(line)


if __name__ == "__main__":
    main()
