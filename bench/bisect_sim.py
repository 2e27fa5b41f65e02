"""Simulated bisection of a 5% step over 1024 commits: perfline against three rules.

    .venv/bin/python bench/bisect_sim.py [--trials 1000] [--quick] [--jobs N]

Every trial draws a culprit uniformly from 1..1023; all methods get the same culprit
and their own noise stream. A sample at commit k is level(k) * exp(noise), level 1.00
before the culprit and 1.05 from it on (a lower-is-better time that got 5% slower), the
noise Gaussian with sd 1%, 2% or 3%, or Student-t with 3 degrees of freedom and scale
2%. A "run" is one benchmark execution, i.e. one sample; runs at the known endpoints
count. "exact" is the share of trials whose answer is the culprit itself.

Methods:
  perfline     Bayesian bisection (src/perfline/bisect) through the loop of `perfline
               bisect start` (Bisection.next_probe/observe, without builds and store):
               most informative probes until the posterior reaches 0.995, then the A/B of the
               culprit against its parent, on the samples already taken at the two and
               the missing ones (2 a side at least) taken alternately. Every run counts,
               endpoints and A/B included; "of which A/B" are the runs taken while the
               A/B was deciding. A sample that moves the posterior below 0.995 sends the
               bisection back to probing.
  perfline+history
               the same, started with 5 stored samples at each endpoint that are not
               runs of the bisection (`perfline bisect start --job` takes the stored
               runs of the job's case at the good and bad commits: a regression that
               `perfline detect` or `compare` found has them). They are drawn from the
               same noise, i.e. the machine has not drifted since.
  git-bisect   `git bisect run` with a script that runs the benchmark once and says
               bad above a threshold midway between the two true levels (the best case:
               the user knows both levels exactly). Endpoints are not run.
  asv-find     the rule of `asv find` (airspeed-velocity/asv, asv/commands/find.py,
               do_search): one run per commit, cached; with lo, mid = lo + (hi-lo)//2
               and hi measured, recurse into (lo, mid) if the rise lo->mid is at least
               the rise mid->hi (each clipped at 0), else into (mid, hi); the answer is
               hi once hi - lo <= 1.
  pinpoint     Pinpoint-like: 10 runs at each endpoint and at each probed midpoint; the
               midpoint is compared with both ends of the current range (KS and
               Mann-Whitney with asymptotic p-values, the smaller one, at 0.01); it
               joins the side it is not different from; while undecided (different
               from both or from neither) 10 more runs, up to 40 at one commit, then
               the nearer median decides.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from perfline.bisect import Bisection

N_COMMITS = 1024
STEP = 1.05
NOISES: dict[str, tuple[str, float]] = {
    "gauss 1%": ("gauss", 0.01),
    "gauss 2%": ("gauss", 0.02),
    "gauss 3%": ("gauss", 0.03),
    "t(3) 2%": ("t3", 0.02),
}
METHODS = ("perfline", "perfline+history", "git-bisect", "asv-find", "pinpoint")
HISTORY_SAMPLES = 5  # per endpoint, for perfline+history; --history-samples

Measure = Callable[[int], float]


@dataclass(frozen=True)
class Outcome:
    exact: bool
    runs: int
    ab_runs: int


def make_measure(culprit: int, kind: str, scale: float, rng: np.random.Generator) -> Measure:
    def measure(commit: int) -> float:
        noise = rng.standard_normal() if kind == "gauss" else rng.standard_t(3)
        return (STEP if commit >= culprit else 1.0) * float(np.exp(scale * noise))

    return measure


class Counted:
    """A measure that counts its calls: the runs a method spent."""

    def __init__(self, measure: Measure) -> None:
        self.measure, self.runs = measure, 0
        self.ab_runs = 0  # of `runs`, those a method spent confirming its answer

    def __call__(self, commit: int) -> float:
        self.runs += 1
        return self.measure(commit)


def perfline(measure: Counted, history: int = 0) -> int:
    # The loop of `perfline bisect start` (bisect/driver.py) without builds and store.
    # Stored samples come from the uncounted measure: they were taken before.
    prior = [(k, measure.measure(k)) for k in (0, N_COMMITS - 1) for _ in range(history)]
    bisection = Bisection(N_COMMITS, prior_obs=prior)
    while (commit := bisection.next_probe()) is not None:
        measure.ab_runs += bisection.confirming
        bisection.observe(commit, measure(commit))
    return bisection.result().culprit


def git_bisect(measure: Counted) -> int:
    threshold = (1.0 + STEP) / 2.0
    good, bad = 0, N_COMMITS - 1
    while bad - good > 1:
        mid = (good + bad) // 2
        if measure(mid) > threshold:
            bad = mid
        else:
            good = mid
    return bad


def asv_find(measure: Counted) -> int:
    results: dict[int, float] = {}

    def result(commit: int) -> float:
        if commit not in results:
            results[commit] = measure(commit)
        return results[commit]

    lo, hi = 0, N_COMMITS - 1
    while hi - lo > 1:
        mid = (hi - lo) // 2 + lo
        lo_v, mid_v, hi_v = result(lo), result(mid), result(hi)
        # asv's difference_3way normalises both rises by the same positive denominator,
        # which cannot change the comparison; its max(..., 0) clipping does.
        rise_hi, rise_lo = max(hi_v - mid_v, 0.0), max(mid_v - lo_v, 0.0)
        if rise_lo >= rise_hi:
            hi = mid
        else:
            lo = mid
    return hi


def _mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided, normal approximation with continuity correction (no ties here)."""
    ranks = np.argsort(np.argsort(np.concatenate([a, b]))) + 1
    u = ranks[: len(a)].sum() - len(a) * (len(a) + 1) / 2
    sd = np.sqrt(len(a) * len(b) * (len(a) + len(b) + 1) / 12)
    z = (abs(u - len(a) * len(b) / 2) - 0.5) / sd
    return float(special.erfc(z / np.sqrt(2)))


def _ks_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided, as scipy's ks_2samp(method="asymp"): the one-sample law at n1*n2/(n1+n2)."""
    points = np.concatenate([a, b])
    cdf_a = np.searchsorted(np.sort(a), points, side="right") / len(a)
    cdf_b = np.searchsorted(np.sort(b), points, side="right") / len(b)
    d = np.abs(cdf_a - cdf_b).max()
    return float(stats.kstwo.sf(d, round(len(a) * len(b) / (len(a) + len(b)))))


def _different(a: list[float], b: list[float]) -> bool:
    # Hand-written asymptotic p-values: scipy's general entry points cost ~0.5 ms a call,
    # which made this rule the slowest part of the benchmark.
    x, y = np.asarray(a), np.asarray(b)
    return min(_ks_p(x, y), _mann_whitney_p(x, y)) < 0.01


def pinpoint(measure: Counted, batch: int = 10, cap: int = 40) -> int:
    samples: dict[int, list[float]] = {}

    def more(commit: int) -> list[float]:
        samples.setdefault(commit, []).extend(measure(commit) for _ in range(batch))
        return samples[commit]

    lo, hi = 0, N_COMMITS - 1
    more(lo)
    more(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        at_mid = more(mid)
        while True:
            from_lo, from_hi = _different(at_mid, samples[lo]), _different(at_mid, samples[hi])
            if from_lo != from_hi:
                is_bad = from_lo
                break
            if len(at_mid) >= cap:
                median = np.median(at_mid)
                is_bad = abs(median - np.median(samples[hi])) < abs(median - np.median(samples[lo]))
                break
            at_mid = more(mid)
        if is_bad:
            hi = mid
        else:
            lo = mid
    return hi


RULES: dict[str, Callable[[Counted], int]] = {
    "perfline": perfline,
    "git-bisect": git_bisect,
    "asv-find": asv_find,
    "pinpoint": pinpoint,
}


def run_trial(args: tuple[int, str, int, str, int]) -> Outcome:
    noise_index, noise, trial, method, history = args
    kind, scale = NOISES[noise]
    culprit = int(np.random.default_rng([noise_index, trial]).integers(1, N_COMMITS))
    rng = np.random.default_rng([noise_index, trial, METHODS.index(method) + 1])
    measure = Counted(make_measure(culprit, kind, scale, rng))
    found = perfline(measure, history) if method == "perfline+history" else RULES[method](measure)
    return Outcome(found == culprit, measure.runs, measure.ab_runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="100 trials per cell")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--history-samples", type=int, default=HISTORY_SAMPLES,
                        help="stored samples at each endpoint for perfline+history")
    args = parser.parse_args(argv)
    trials = 100 if args.quick else args.trials

    started = time.perf_counter()
    tasks = [
        (i, noise, trial, method, args.history_samples)
        for i, noise in enumerate(NOISES)
        for method in METHODS
        for trial in range(trials)
    ]
    with ProcessPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(run_trial, tasks, chunksize=max(1, trials // 20)))
    elapsed = time.perf_counter() - started

    print(f"{trials} trials per row; N = {N_COMMITS} commits, 5% step; runs include endpoints"
          f" (not perfline+history's {args.history_samples} stored samples at each)")
    print(
        f"{'noise':<10} {'method':<16} {'exact':>8} {'mean runs':>10} {'p90 runs':>9}"
        f" {'of which A/B':>13}"
    )
    for cell in range(len(NOISES) * len(METHODS)):
        chunk = outcomes[cell * trials : (cell + 1) * trials]
        noise, method = tasks[cell * trials][1], tasks[cell * trials][3]
        exact = 100.0 * np.mean([o.exact for o in chunk])
        runs = np.array([o.runs for o in chunk])
        ab = f"{np.mean([o.ab_runs for o in chunk]):>13.1f}" if method.startswith("perfline") else ""
        print(
            f"{noise:<10} {method:<16} {exact:>7.1f}% {runs.mean():>10.1f} "
            f"{np.percentile(runs, 90):>9.0f} {ab}".rstrip()
        )
    print(f"{elapsed:.0f} s on {args.jobs} processes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
