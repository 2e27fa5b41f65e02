"""What a tracker's first passes find: detection by the length of its series.

    .venv/bin/python bench/short_series.py [--trials 1000] [--points 5,12,20,40] [--jobs 2]

A tracker starts from `since` with few tested commits; change points need 6 on each side
(and 12 points cannot reach their 0.001 by permutation), so its first weeks are judged
by neighbour pairs and pooled windows (track.judging.series_changes). Each trial is a
series of P tested commits, one run of 5 repetitions each (lognormal noise of 1-3% a
repetition, drawn per series, and a 0.5% run-to-run offset, as bench/track_chaos.py's
histories have), with one step of 3-10% (lower is better, slower) between two of them
drawn uniformly, and an A/A series of the same noise. Printed per P: how often a
regression record's range holds the step (`detected`; before its confirmation, which
bench/track_sim.py prices), by where the step is (the first split, which only ever has
one tested commit before it; the last, which the next passes see again; the others),
and the records an A/A series opens (per series, and how many of them only the screen
opened: each costs a confirmation of at most 20 pairs, strict ones 40).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from perfline.track.judging import Change, series_changes
from track_sim import BETWEEN_RUNS, FLOOR_PCT, NARROWED, REPEAT, History, as_series


@dataclass(frozen=True)
class Outcome:
    split: int
    detected: bool
    false: int
    false_screened: int


def regressions(history: History, points: int) -> list[Change]:
    """The regression records the tracker's judging opens on `points` tested commits of
    `history`, one run each."""
    values = [history.run(commit, REPEAT) for commit in range(points)]
    return [c for c in series_changes(as_series(values), FLOOR_PCT, NARROWED) if c.point.change_pct > 0]


def trial(args: tuple[int, int]) -> Outcome:
    points, seed = args
    rng = np.random.default_rng(seed)
    split = int(rng.integers(1, points))
    noise = float(rng.uniform(0.01, 0.03))
    found = regressions(History(split, float(rng.uniform(0.03, 0.10)), noise, rng), points)
    false = regressions(History(points, 0.0, noise, rng), points)
    return Outcome(split, any(c.first <= split <= c.last for c in found), len(false),
                   sum(c.screened for c in false))


def row(points: int, outcomes: list[Outcome]) -> str:
    def rate(places: tuple[int, ...] | None) -> str:
        chosen = [o.detected for o in outcomes if places is None or o.split in places]
        return f"{np.mean(chosen):.1%}" if chosen else "-"

    return (f"{points:>4} {rate(None):>9} {rate((1,)):>12} {rate((points - 1,)):>11} "
            f"{rate(tuple(range(2, points - 1))):>8}   {np.mean([o.false for o in outcomes]):>22.3f} "
            f"{np.mean([o.false_screened for o in outcomes]):>17.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--points", default="5,12,20,40")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.monotonic()
    print(f"{args.trials} series per row; step 3-10% between two of P tested commits, noise 1-3% a repetition "
          f"(5 a run) and {100 * BETWEEN_RUNS:g}% between runs; detected = a regression record whose range holds it")
    print(f"{'P':>4} {'detected':>9} {'first split':>12} {'last split':>11} {'others':>8}   "
          f"{'A/A records per series':>22} {'of them screened':>17}")
    with ProcessPoolExecutor(args.jobs) as pool:
        for points in (int(p) for p in args.points.split(",")):
            seeds = [(points, args.seed * 1_000_003 + points * 10_007 + i) for i in range(args.trials)]
            outcomes = list(pool.map(trial, seeds, chunksize=20))
            print(row(points, outcomes), flush=True)
    print(f"{time.monotonic() - started:.0f} s on {args.jobs} process(es)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
