"""The change-point detector's CPU time on long series, against another version of it (issue 30).

    .venv/bin/python bench/changepoint_speed.py [--against OLD.py] [--runs 15]

Times stats.changepoint.detect, best of --runs, as its callers call it (lists of
repetitions), on: bench/changepoint_eval.py's 10,000-point series (five steps, t noise,
AR 0.2); the issue's case (one 3% step at 60% in 1% normal noise, four seeds); and
bench/store_scale.py's series (2,000 points of 5 lognormal repetitions, a 4% step at
70%), whose 100 make its `perfline detect` row. With --against, the same cases are timed
with that file's detect in the same process, case by case (e.g. main's version:
`git show main:src/perfline/stats/changepoint.py > /tmp/old.py`), so a shared machine's
load falls on both alike. CPU time: on a loaded machine the wall clock measures the load.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from changepoint_eval import long_series, one_step_series
from perfline.stats.changepoint import detect

Detector = Callable[[list[list[float]]], object]
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


def load(path: Path) -> Detector:
    spec = importlib.util.spec_from_file_location("reference_changepoint", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.detect  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", type=Path, help="another changepoint.py to time beside this tree's")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    reference = load(args.against) if args.against else None
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


if __name__ == "__main__":
    main()
