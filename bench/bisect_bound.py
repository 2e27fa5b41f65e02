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

A second table prices the confirmation alone, the A/B of fresh samples of the culprit
against its parent on the true 5% step, and its rate of confirming an A/A pair, under
these rules: the shipped one (bisect/confirm.py: the anytime-valid t-test of
stats/anytime_t.py, looked at after every pair, alpha 1%, bet on the true step); the one
it replaced (Welch's t on a Pocock-type boundary at 4, 6, 9, 14, 21 and 32 a side); that
one with the variance pooled with a noise estimate of 20 degrees of freedom from the
bisection's other samples (one way to a cheaper A/B; it assumes the same noise at every
commit, so it is also run on A/A pairs whose noise is twice the estimate's at the bad
level); that one at alpha 5%.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np
from scipy import stats

from perfline.bisect.confirm import CONFIDENCE, ABConfirmation, Decision
from perfline.stats.sequential import SequentialPlan

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


# The degrees of freedom of the bisection's own noise estimate in the pooled-variance rule
# (a bisection at 2% noise has ~25 samples at two levels when its A/B starts).
BORROWED_DF = 20


# The looks of the A/B before the anytime-valid one, and its level.
LOOKS = SequentialPlan.up_to(32, 0.01, CONFIDENCE, first=4)


def shipped_ab(noise: float, step: float, rng: np.random.Generator) -> tuple[int, bool]:
    """The shipped A/B on lognormal samples, bet on the true step: its runs and whether
    it confirmed."""
    ab = ABConfirmation(0, 1, increase=True, effect=math.log1p(STEP) / noise)
    while (side := ab.next_probe()) is not None:
        ab.observe(side, float(np.exp(rng.normal(math.log(step) if side == 1 else 0.0, noise))))
    result = ab.result()
    return result.samples, result.decision is Decision.CONFIRMED


def looked_ab(step: float, own_noise: float, plan: SequentialPlan, rng: np.random.Generator,
              p_value: Callable[[np.ndarray, np.ndarray], float]) -> tuple[int, bool]:
    """An A/B on lognormal samples judged at the plan's looks, each look's one-sided
    `p_value(a, b)` against the boundary's nominal level: its runs and whether it confirmed."""
    a = np.empty(0)
    b = np.empty(0)
    for n in plan.looks:
        a = np.append(a, rng.normal(0.0, own_noise, n - len(a)))
        b = np.append(b, rng.normal(math.log(step), own_noise, n - len(b)))
        if p_value(a, b) < plan.one_sided_alpha(n):
            return 2 * n, True
    return 2 * len(a), False


def pocock_ab(noise: float, step: float, plan: SequentialPlan, rng: np.random.Generator) -> tuple[int, bool]:
    """The A/B it replaced: Welch's t of the logs at the plan's looks."""
    return looked_ab(step, noise, plan, rng,
                     lambda a, b: float(stats.ttest_ind(b, a, equal_var=False, alternative="greater").pvalue))


def pooled_ab(noise: float, step: float, rng: np.random.Generator, *, pair_noise: float | None = None) -> tuple[int, bool]:
    """The A/B with its variance pooled with an estimate from BORROWED_DF degrees of
    freedom of `noise`; the pair's own samples have `pair_noise` (default `noise`).
    Same looks and boundary as pocock_ab; a t test on the pooled variance."""
    borrowed_ss = noise**2 * rng.chisquare(BORROWED_DF)

    def p_value(a: np.ndarray, b: np.ndarray) -> float:
        n = len(a)
        dof = 2 * n - 2 + BORROWED_DF
        ss = float(np.var(a) * n + np.var(b) * n) + borrowed_ss
        return float(stats.t.sf((np.mean(b) - np.mean(a)) / math.sqrt(ss / dof * 2 / n), dof))

    return looked_ab(step, noise if pair_noise is None else pair_noise, LOOKS, rng, p_value)


def confirmation_table(trials: int, seed: int) -> None:
    loose = SequentialPlan.up_to(LOOKS.looks[-1], 0.05, CONFIDENCE, first=LOOKS.looks[0])
    rules: list[tuple[str, Callable[[float, float, np.random.Generator], tuple[int, bool]]]] = [
        ("shipped: anytime-valid t, every pair, alpha 1%", shipped_ab),
        ("before: Welch on Pocock looks, alpha 1%", lambda s, r, g: pocock_ab(s, r, LOOKS, g)),
        (f"  variance pooled with {BORROWED_DF} df of the bisection's", pooled_ab),
        ("    the same, pair's noise 2x the estimate's", lambda s, r, g: pooled_ab(s, r, g, pair_noise=2 * s)),
        ("  at alpha 5%", lambda s, r, g: pocock_ab(s, r, loose, g)),
    ]
    print(f"\nthe confirmation A/B alone, {trials} trials a cell: runs on the 5% step (both sides), "
          "and how often it confirms an A/A pair")
    print(f"{'rule':<46} " + " ".join(f"{f'runs@{s:.0%}':>8} {f'A/A@{s:.0%}':>7}" for s in NOISES))
    for name, rule in rules:
        cells = []
        for noise in NOISES:
            rng = np.random.default_rng(seed)
            runs = np.mean([rule(noise, 1.0 + STEP, rng)[0] for _ in range(trials)])
            false = np.mean([rule(noise, 1.0, rng)[1] for _ in range(trials)])
            cells.append(f"{runs:>8.1f} {false:>7.2%}")
        print(f"{name:<46} " + " ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ab-trials", type=int, default=2000, help="trials a cell of the confirmation table")
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
    confirmation_table(args.ab_trials, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
