"""The verdict's error rates under the noise of issue 13's review, against its targets.

    .venv/bin/python bench/verdict_scenarios.py [--nulls 2000] [--steps 500]
        [--only rows,ab,pairs-auto,tables]

Called by bench/calibration.py as its section (d); runs alone too. Every row simulates
two sides and runs perfline's own comparison (stats.two_sample.compare, and the table
rule of analysis.comparison for whole tables); targets at alpha 0.01:

- false `significant` on A/A, per metric: <= 1.5%
- any false `*` in a table of 1 benchmark metric + 25 monitor metrics: <= 1.5%
- power: a 3% step in 1% noise (3 runs x 5 a side) >= 90%; a 5% step with 10%
  outliers at x3, n=20 >= 90%
- coverage of the 95% CI of the change: 93-97%
- `ab --pairs auto` (stats.sequential, at most 30 pairs): false significant on A/A <= 1.5%;
  mean pairs to decide a 3% step and an A/A pair in 1% noise
- `compare --csv` of 20 independent columns with no change, one family: any `*` <= 2%
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

import numpy as np

from perfline.analysis.comparison import MetricRow, family_controlled_together
from perfline.records.metric import Direction, Metric
from perfline.stats.sequential import SequentialPlan
from perfline.stats.summary import summarize
from perfline.stats.two_sample import compare

SCORE = Metric("bench.seconds", "s", Direction.LOWER)
MONITOR = Metric("mon.value", "", Direction.NEUTRAL)
Noise = Callable[[np.random.Generator, int], np.ndarray]  # multiplicative noise around 1


def lognormal(cv: float) -> Noise:
    return lambda rng, n: rng.lognormal(0, cv, n)


def normal(cv: float) -> Noise:
    return lambda rng, n: 1 + rng.normal(0, cv, n)


def t3(cv: float) -> Noise:
    # t with 3 df scaled to the same standard deviation (its variance is 3).
    return lambda rng, n: 1 + cv / math.sqrt(3) * rng.standard_t(3, n)


def bimodal(cv: float, share: float = 0.2, gap: float = 0.1) -> Noise:
    return lambda rng, n: (1 + gap * (rng.random(n) < share)) * rng.lognormal(0, cv, n)


def outliers(cv: float, share: float = 0.1, factor: float = 3.0) -> Noise:
    return lambda rng, n: np.where(rng.random(n) < share, factor, 1.0) * rng.lognormal(0, cv, n)


def sides(rng: np.random.Generator, noise: Noise, step: float, runs: int, per_run: int,
          between: float) -> tuple[list[float], list[int], list[float], list[int]]:
    def side(level: float) -> tuple[list[float], list[int]]:
        values: list[float] = []
        labels: list[int] = []
        for run in range(runs):
            offset = rng.lognormal(0, between) if between else 1.0
            values += (100 * level * offset * noise(rng, per_run)).tolist()
            labels += [run] * per_run
        return values, labels
    (a, la), (b, lb) = side(1.0), side(1.0 + step)
    return a, la, b, lb


def row(name: str, noise: Noise, trials: int, seed: int, *, step: float = 0.0, runs: int = 1,
        per_run: int = 10, between: float = 0.0, target: str = "") -> None:
    rng = np.random.default_rng(seed)
    significant = covered = 0
    for _ in range(trials):
        a, la, b, lb = sides(rng, noise, step, runs, per_run, between)
        c = compare(a, b, SCORE, base_runs=la, other_runs=lb)
        significant += c.significant
        # The truth is the ratio of the expected means: the same noise on both sides.
        covered += c.ci_pct[0] <= 100 * step <= c.ci_pct[1]
    what = "power" if step else "false significant"
    print(f"  {name:<44} {what:>17} {100 * significant / trials:5.1f}%   CI covers {100 * covered / trials:5.1f}%"
          f"   {target}")


def ab_order(trials: int, seed: int, effect: float, abba: bool) -> float:
    """Paired A/A with the second of each pair `effect` slower; ABBA alternates who is second."""
    rng = np.random.default_rng(seed)
    false = 0
    pairs = 10
    for _ in range(trials):
        a, b = 100 * rng.lognormal(0, 0.01, pairs), 100 * rng.lognormal(0, 0.01, pairs)
        second_is_b = np.array([True if not abba else i % 2 == 0 for i in range(pairs)])
        b = np.where(second_is_b, b * (1 + effect), b)
        a = np.where(~second_is_b, a * (1 + effect), a)
        false += compare(a, b, SCORE, paired=True).significant
    return false / trials


def pairs_auto(trials: int, seed: int, step: float, noise: Noise) -> None:
    """`ab --pairs auto`: pairs drawn one at a time, stopped by the plan's looks."""
    plan = SequentialPlan.up_to(30, 0.01)
    rng = np.random.default_rng(seed)
    used: list[int] = []
    verdicts: dict[str, int] = {}
    covered = 0
    for _ in range(trials):
        a: list[float] = []
        b: list[float] = []
        while not (a and plan.done(a, b, SCORE, 1.0)):
            drift = rng.lognormal(0, 0.02)  # shared by the pair: the machine's slow spells
            a.append(float(100 * drift * noise(rng, 1)[0]))
            b.append(float(100 * (1 + step) * drift * noise(rng, 1)[0]))
        final = plan.judge(a, b, SCORE, 1.0)
        used.append(len(a))
        verdicts[final.verdict] = verdicts.get(final.verdict, 0) + 1
        covered += final.ci_pct[0] <= 100 * step <= final.ci_pct[1]
    shares = ", ".join(f"{v} {100 * k / trials:.1f}%" for v, k in sorted(verdicts.items()))
    print(f"  {100 * step:g}% step: mean pairs {np.mean(used):5.1f} (median {np.median(used):g}); {shares}; "
          f"CI (repeated, {100 * plan.confidence:.4g}% over the looks) covers {100 * covered / trials:.1f}%")


def tables(trials: int, seed: int, controlled: bool) -> float:
    rng = np.random.default_rng(seed)
    any_star = 0
    for _ in range(trials):
        rows = []
        for metric in [SCORE] + [MONITOR] * 25:
            a, b = 100 * rng.lognormal(0, 0.02, 10), 100 * rng.lognormal(0, 0.02, 10)
            source = "benchmark" if metric is SCORE else "monitor"
            rows.append(MetricRow(metric, source, summarize(a.tolist()), [compare(a, b, metric, floor_pct=0)]))
        judged = family_controlled_together(rows, 0.01, {0}) if controlled else rows
        any_star += any(c is not None and c.significant for r in judged for c in r.others)
    return any_star / trials


def csv_tables(trials: int, seed: int, primary: bool) -> tuple[float, float]:
    """Null `compare --csv` tables of 20 columns, n=10 a side: any `*` with each column at
    alpha, and as `compare --csv` judges them (one family, or the first column primary)."""
    rng = np.random.default_rng(seed)
    separate = family = 0
    for _ in range(trials):
        rows = []
        for _ in range(20):
            a, b = 100 * rng.lognormal(0, 0.02, 10), 100 * rng.lognormal(0, 0.02, 10)
            rows.append(MetricRow(SCORE, "benchmark", summarize(a.tolist()), [compare(a, b, SCORE, floor_pct=0)]))
        separate += any(c is not None and c.significant for r in rows for c in r.others)
        judged = family_controlled_together(rows, 0.01, {0} if primary else set())
        family += any(c is not None and c.significant for r in judged for c in r.others)
    return separate / trials, family / trials


SECTIONS = ("rows", "ab", "pairs-auto", "tables")


def report(nulls: int, steps: int, only: tuple[str, ...] = SECTIONS) -> None:
    if "rows" in only:
        rows(nulls, steps)
    if "ab" in only:
        print(f"\nab, 10 pairs, second of a pair 0.5% slower, {nulls} trials; target <= 1.5%")
        print(f"  A always first                {100 * ab_order(nulls, 40, 0.005, abba=False):5.1f}%")
        print(f"  ABBA (perfline ab)            {100 * ab_order(nulls, 40, 0.005, abba=True):5.1f}%")
    if "pairs-auto" in only:
        print("\nab --pairs auto, at most 30 pairs, 1% noise and 2% drift shared by a pair; target A/A "
              "regression/improvement <= 1.5%")
        pairs_auto(nulls, 60, 0.0, lognormal(0.01))
        pairs_auto(steps, 61, 0.03, lognormal(0.01))
        pairs_auto(steps, 62, 0.0, outliers(0.01))
    if "tables" in only:
        n_tables = max(nulls // 4, 100)
        print(f"\nnull tables of 1 benchmark + 25 monitor metrics, {n_tables} tables; any false *, target <= 1.5%")
        print(f"  each metric at alpha          {100 * tables(n_tables, 50, controlled=False):5.1f}%")
        print(f"  monitors by Benjamini-Hochberg {100 * tables(n_tables, 50, controlled=True):5.1f}%")
        print(f"\ncompare --csv, 20 independent columns without change, n=10 a side, {n_tables} tables; "
              "any false *, target <= 2%")
        separate, family = csv_tables(n_tables, 51, primary=False)
        print(f"  each column at alpha          {100 * separate:5.1f}%")
        print(f"  one family (Benjamini-Hochberg at alpha/2) {100 * family:5.1f}%")
        print(f"  --primary: 1 column at alpha, 19 a family at alpha/2 {100 * csv_tables(n_tables, 52, True)[1]:5.1f}%")


def rows(nulls: int, steps: int) -> None:
    print(f"A/A, n=10 a side unless said, {nulls} trials a row; target false significant <= 1.5%, "
          "CI coverage 93-97%")
    row("normal 2%", normal(0.02), nulls, 1)
    row("lognormal 2%", lognormal(0.02), nulls, 2)
    row("t(3) 2%", t3(0.02), nulls, 3)
    row("bimodal 80/20, modes 10% apart", bimodal(0.01), nulls, 4)
    row("10% outliers at x3", outliers(0.01), nulls, 5)
    for between in (0.005, 0.01, 0.02):
        for runs in (1, 3, 5):
            row(f"run-to-run CV {100 * between:g}%, {runs} run(s) x 5 a side", lognormal(0.01), nulls,
                10 + runs, runs=runs, per_run=5, between=between)
    print(f"\nsteps, {steps} trials a row")
    row("3% step, 1% noise, 3 runs x 5 a side", lognormal(0.01), steps, 30, step=0.03, runs=3, per_run=5,
        target="target power >= 90%")
    row("3% step, 1% noise, 4 runs x 5 a side", lognormal(0.01), steps, 31, step=0.03, runs=4, per_run=5)
    row("5% step, 10% outliers at x3, n=20", outliers(0.01), steps, 32, step=0.05, per_run=20,
        target="target power >= 90%")
    row("5% step, 5% lognormal noise, n=10", lognormal(0.05), steps, 33, step=0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nulls", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated, of " + ", ".join(SECTIONS))
    args = parser.parse_args()
    only = tuple(name.strip() for name in args.only.split(","))
    if unknown := [name for name in only if name not in SECTIONS]:
        raise SystemExit(f"unknown section: {', '.join(unknown)} (known: {', '.join(SECTIONS)})")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    report(args.nulls, args.steps, only)


if __name__ == "__main__":
    main()
