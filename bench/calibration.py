"""Calibrate perfline's comparison statistics on this machine and on synthetic data.

    .venv/bin/python bench/calibration.py [--pairs 100] [--n 10] [--loops 20000] [--quick]

(a) Real A/A pairs: sched-pipe with one configuration, run interleaved A B A B …, n runs
    per side. Every pair is "no change", so each significant verdict is a false one;
    at the defaults the rate should be at most about alpha (1%). For contrast, the same
    runs compared one after the other (A of a pair against B of the next). Also prints
    the measured noise and the smallest change detectable with 90% power at that noise.
(b) Synthetic samples of known effect: how often the 95% CI of the change covers the
    truth (target 93–97%), for normal and lognormal noise at n=5 and n=10.
(c) Synthetic A/A pairs whose sides use the adaptive run count (`--repeat auto`):
    what stopping on a precision does to the false-significant rate.
(d) bench/verdict_scenarios.py: heavy tails, bimodal noise, outliers, run-to-run
    variance, order effects and whole tables, each against its target.
(e) bench/changepoint_calibration.py: the change-point detector's false alarms on
    white, autocorrelated and mixed-repetition series, its power on real steps and the
    coverage of the recorded change's interval, each against its target.

See docs/statistics.md for the method these figures check.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import changepoint_calibration
import verdict_scenarios

from perfline.benchmarks import BENCHMARKS
from perfline.records.metric import Direction, Measurement, Metric
from perfline.stats import summarize
from perfline.stats.two_sample import (
    MIN_SAMPLES,
    compare,
    detectable_change_pct,
    mean_ci_halfwidth_pct,
    outlier_indexes,
)

ALPHA = 0.01
FLOOR_PCT = 1.0
POWER = 0.9
SYNTHETIC_CHANGE_PCT = 5.0
SYNTHETIC_CV = 0.05
SYNTHETIC = Metric("synthetic.seconds", "s", Direction.LOWER)

Sampler = Callable[[np.random.Generator, float, int], np.ndarray]


def normal(rng: np.random.Generator, level: float, n: int) -> np.ndarray:
    return rng.normal(level, level * SYNTHETIC_CV, n)


def lognormal(rng: np.random.Generator, level: float, n: int) -> np.ndarray:
    return level * unit_lognormal(rng, SYNTHETIC_CV, n)


def unit_lognormal(rng: np.random.Generator, cv: float, n: int) -> np.ndarray:
    # Mean exactly 1, so that the true change between two levels is their ratio.
    sigma = math.sqrt(math.log1p(cv**2))
    return rng.lognormal(-(sigma**2) / 2, sigma, n)


@dataclass
class Side:
    values: dict[Metric, list[float]]

    def add(self, measurements: list[Measurement]) -> None:
        for m in measurements:
            self.values.setdefault(m.metric, []).append(m.value)


def measure_aa_pairs(pairs: int, n: int, loops: int) -> list[tuple[Side, Side]]:
    """Run sched-pipe 2·n·pairs times, alternating the A and B sides of each pair."""
    result = []
    with tempfile.TemporaryDirectory() as workdir:
        with BENCHMARKS.get("sched-pipe")({"loops": loops}, Path(workdir)) as bench:
            bench.run_once()  # warm-up: page cache, CPU frequency; not counted
            started = time.monotonic()
            for pair in range(pairs):
                a, b = Side({}), Side({})
                for _ in range(n):
                    a.add(bench.run_once())
                    b.add(bench.run_once())
                result.append((a, b))
                elapsed = time.monotonic() - started
                print(f"\r  pair {pair + 1}/{pairs}, {elapsed:.0f} s", end="", file=sys.stderr)
    print(file=sys.stderr)
    return result


def report_aa(pairs: list[tuple[Side, Side]], n: int) -> None:
    metrics = list(pairs[0][0].values)
    # A of one pair against B of the next: the two sides measured one after the other,
    # as two separate `perfline run`s would be, so drift between them is not cancelled.
    sequential = [(a, b) for (a, _), (_, b) in zip(pairs, pairs[1:])]
    print(f"{'metric':28} {'':15} {'false significant':>18} {'t p<α':>7} {'rank p<α':>9}")
    for metric in metrics:
        _print_false_rates(metric, "interleaved", pairs)
        _print_false_rates(metric, "one after other", sequential)
    primary = metrics[0]
    sides = [side.values[primary] for pair in pairs for side in pair]
    cvs = np.array([summarize(values).cv_pct for values in sides])
    # The t test's standard error is built from variances, so the noise that sets its
    # power is the root-mean-square CV, not the median.
    rms_cv = float(np.sqrt(np.mean(cvs**2)))
    means = np.array([np.mean(values) for values in sides])
    flagged = sum(bool(outlier_indexes(values)) for values in sides)
    print(f"\n{primary.name}, within one side of {n} runs:")
    print(
        f"  CV median {np.median(cvs):.2f}%, RMS {rms_cv:.2f}%, "
        f"range {cvs.min():.2f}–{cvs.max():.2f}%"
    )
    print(
        f"  drift: the {len(sides)} side means vary by CV {100 * means.std() / means.mean():.2f}%"
        f" (the within-side noise alone would give {rms_cv / math.sqrt(n):.2f}%)"
    )
    print(f"  sides with an outlier flagged: {flagged}/{len(sides)}")
    print(f"smallest change detectable with {POWER:.0%} power at α={ALPHA}, RMS CV {rms_cv:.2f}%:")
    for size in sorted({MIN_SAMPLES, n, 20}):
        change = detectable_change_pct(rms_cv, size, ALPHA, POWER)
        print(f"  n={size:>2} per side: {change:5.2f}%  (a verdict also needs > {FLOOR_PCT:g}%)")


def coverage(sampler: Sampler, n: int, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    truth = SYNTHETIC_CHANGE_PCT
    covered = 0
    for _ in range(trials):
        base = sampler(rng, 100.0, n)
        other = sampler(rng, 100.0 * (1 + truth / 100), n)
        low, high = compare(base, other, SYNTHETIC).ci_pct
        covered += low <= truth <= high
    return covered / trials


def report_coverage(trials: int) -> None:
    se = 100 * math.sqrt(0.95 * 0.05 / trials)
    print(
        f"true change +{SYNTHETIC_CHANGE_PCT:g}%, CV {100 * SYNTHETIC_CV:g}%, {trials} trials each "
        f"(binomial s.e. {se:.2f}%); target 93–97%"
    )
    for sampler in (normal, lognormal):
        for n in (5, 10):
            print(f"  {sampler.__name__:9} n={n:>2}: {100 * coverage(sampler, n, trials, n):5.1f}%")


def adaptive_side(
    rng: np.random.Generator, cv: float, precision_pct: float, least: int, most: int
) -> np.ndarray:
    """The `--repeat auto` rule: at least `least` runs, then until the CI is precise enough."""
    values = list(unit_lognormal(rng, cv, least))
    while len(values) < most and mean_ci_halfwidth_pct(values) > precision_pct:
        values.extend(unit_lognormal(rng, cv, 1))
    return np.array(values)


def report_adaptive(trials: int) -> None:
    precision, most = 1.0, 30
    print(
        f"A/A, lognormal noise, precision {precision:g}%, max {most} runs, {trials} trials; "
        "floor 0 so that the test alone is measured;\nbeside each, the rate with a fixed n "
        "equal to the adaptive mean n"
    )
    for cv_pct in (1.0, 2.0, 3.0):
        for least in (MIN_SAMPLES, 10):
            rng = np.random.default_rng(int(cv_pct * 100) + least)
            rates, sizes, fixed = 0, [], 0
            for _ in range(trials):
                a = adaptive_side(rng, cv_pct / 100, precision, least, most)
                b = adaptive_side(rng, cv_pct / 100, precision, least, most)
                sizes += [len(a), len(b)]
                rates += compare(a, b, SYNTHETIC, floor_pct=0.0).p_value < ALPHA
            mean_n = round(float(np.mean(sizes)))
            for _ in range(trials):
                a = unit_lognormal(rng, cv_pct / 100, mean_n)
                b = unit_lognormal(rng, cv_pct / 100, mean_n)
                fixed += compare(a, b, SYNTHETIC, floor_pct=0.0).p_value < ALPHA
            print(
                f"  CV {cv_pct:g}%, at least {least:>2} runs: mean n {np.mean(sizes):4.1f}, "
                f"p<α {_pct(rates, trials)} (fixed n={mean_n}: {_pct(fixed, trials)})"
            )


def _print_false_rates(metric: Metric, label: str, pairs: list[tuple[Side, Side]]) -> None:
    comparisons = [
        compare(a.values[metric], b.values[metric], metric, alpha=ALPHA, floor_pct=FLOOR_PCT)
        for a, b in pairs
    ]
    significant = sum(c.significant for c in comparisons)
    total = len(pairs)
    print(
        f"{metric.name:28} {label:15} {significant:>4}/{total} = {_pct(significant, total):>6}"
        f" {_pct(sum(c.p_value < ALPHA for c in comparisons), total):>7}"
        f" {_pct(sum(c.p_value_rank < ALPHA for c in comparisons), total):>9}"
    )


def _pct(count: int, total: int) -> str:
    return f"{100 * count / total:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=100, help="A/A pairs of real runs")
    parser.add_argument("--n", type=int, default=10, help="runs per side of each pair")
    parser.add_argument("--loops", type=int, default=20000, help="sched-pipe round trips per run")
    parser.add_argument("--trials", type=int, default=4000, help="synthetic trials per figure")
    parser.add_argument(
        "--quick", action="store_true", help="10 pairs of 5, 5000 loops, 500 trials: a smoke run"
    )
    args = parser.parse_args()
    # Progress goes to stderr; keep the figures in step with it when both are captured.
    sys.stdout.reconfigure(line_buffering=True)
    if args.quick:
        args.pairs, args.n, args.loops, args.trials = 10, 5, 5000, 500

    print(
        f"(a) real A/A pairs: sched-pipe loops={args.loops}, {args.pairs} pairs of {args.n} "
        f"interleaved runs per side; α={ALPHA}, floor {FLOOR_PCT:g}%"
    )
    report_aa(measure_aa_pairs(args.pairs, args.n, args.loops), args.n)
    print("\n(b) coverage of the 95% CI of the change, synthetic data")
    report_coverage(args.trials)
    print("\n(c) adaptive run count and the false-significant rate, synthetic data")
    report_adaptive(max(args.trials // 2, 200))
    print("\n(d) the verdict under the noise of issue 13 (bench/verdict_scenarios.py)")
    verdict_scenarios.report(nulls=max(args.trials // 2, 200), steps=max(args.trials // 8, 100))
    print("\n(e) change points: false alarms, power, the recorded change's interval "
          "(bench/changepoint_calibration.py)")
    # A quarter of the standalone run's series: the rates at 0.01 stay precise, those at
    # 0.001 are only indicative (bench/changepoint_calibration.py for the table).
    changepoint_calibration.report(nulls=max(args.trials // 4, 300), steps=max(args.trials // 8, 100))


if __name__ == "__main__":
    main()
