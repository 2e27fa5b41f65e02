"""The fewest runs a noisy bisection can need: an oracle against issue 27's run targets.

    .venv/bin/python bench/bisect_bound.py [--trials 500] [--seed 1]

bench/bisect_sim.py's problem (1024 commits, a 5% step at a uniform culprit, one
lognormal sample a run), solved by a bisection that is told what perfline has to learn:
both levels and the noise's sd exactly. It keeps the exact posterior over the culprit,
probes the commit that splits it nearest to half and half (with known levels and
symmetric noise, about the most informative probe), and stops when one commit holds the
level of belief; it has no endpoint runs (it knows the levels) and no confirmation (it
trusts its model). Its mean runs are a floor for any bisection that meets the same
accuracy: perfline's runs beyond it are the price of learning the levels and the noise
from the data and of confirming the answer on fresh samples (docs/bisect.md).

Printed per noise and level: mean and p90 runs, how often the top commit is the culprit.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

COMMITS = 1024
STEP = 0.05
NOISES = (0.01, 0.02, 0.03)
LEVELS = (0.9, 0.99, 0.995)
# Issue 27's targets for perfline's mean runs (endpoints, probes and the fresh A/B).
TARGETS = {0.02: 30.0, 0.03: 50.0}


def oracle_runs(noise: float, level: float, rng: np.random.Generator) -> tuple[int, bool]:
    """One bisection: runs until the top commit's posterior reaches `level`, and whether
    that commit is the culprit. Commit 0 is good, the culprit is in 1..COMMITS-1, and
    every commit from it on is bad."""
    shift = math.log1p(STEP) / noise  # the step in sd of one sample (log scale)
    culprit = int(rng.integers(1, COMMITS))
    log_post = np.zeros(COMMITS)
    log_post[0] = -np.inf
    places = np.arange(COMMITS)
    runs = 0
    while True:
        post = np.exp(log_post - log_post.max())
        post /= post.sum()
        if post.max() >= level:
            return runs, int(post.argmax()) == culprit
        below = np.cumsum(post)
        probe = int(np.argmin(np.abs(below[:-1] - 0.5)))  # bad at `probe` iff culprit <= probe
        x = rng.normal(shift if culprit <= probe else 0.0)
        log_post += np.where(places <= probe, -((x - shift) ** 2) / 2, -(x ** 2) / 2)
        runs += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"{COMMITS} commits, {STEP:.0%} step, {args.trials} trials a row; an oracle that knows both levels "
          "and the noise: no endpoint runs, no confirmation")
    print(f"{'noise':>5} {'level':>6} {'mean runs':>9} {'p90':>5} {'exact':>7}   perfline's target (all runs)")
    for noise in NOISES:
        for level in LEVELS:
            rng = np.random.default_rng(args.seed)
            done = [oracle_runs(noise, level, rng) for _ in range(args.trials)]
            runs = np.array([r for r, _ in done])
            exact = np.mean([ok for _, ok in done])
            target = f"<= {TARGETS[noise]:g}" if noise in TARGETS else ""
            print(f"{noise:>5.0%} {level:>6} {runs.mean():>9.1f} {np.percentile(runs, 90):>5.0f} {exact:>7.1%}   {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
