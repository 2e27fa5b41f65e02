"""Baseline change-point detectors for bench/changepoint_eval.py, each with its defaults.

apache-otava pins numpy 2.2 and signal-processing-algorithms needs numpy < 2, so they
cannot share one environment with each other or with perfline; each gets its own venv
(bench/setup_changepoint_baselines.sh) and this file doubles as the worker run there:

    python changepoint_baselines.py < {"method": "otava", "series": [[...], ...]}

prints one {"change_points": [...], "seconds": t} per series, t the detector's CPU time. It imports nothing from
perfline, only numpy and the baseline's own package, so it runs in those venvs.
Every detector returns the 0-based indexes of the first point after each change.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Callable

import numpy as np


def zero(values: np.ndarray) -> list[int]:
    """TCPDBench's reference: no change point at all."""
    return []


def otava(values: np.ndarray) -> list[int]:
    """Apache Otava's default analysis (window 50, p 0.001, no magnitude floor)."""
    from otava.analysis import compute_change_points

    change_points, _ = compute_change_points([float(v) for v in values])
    return sorted(int(cp.index) for cp in change_points)


def edivisive(values: np.ndarray) -> list[int]:
    """E-Divisive means (Matteson & James) from signal-processing-algorithms, defaults."""
    from signal_processing_algorithms.energy_statistics.energy_statistics import (
        e_divisive,
    )

    np.random.seed(0)  # its permutation test draws from numpy's global generator
    return sorted(int(i) for i in e_divisive(values.astype(float)))


def ruptures_pelt(values: np.ndarray) -> list[int]:
    import ruptures

    algo = ruptures.Pelt(model="l2").fit(values)
    return algo.predict(pen=_bic_penalty(values))[:-1]


def ruptures_binseg(values: np.ndarray) -> list[int]:
    import ruptures

    algo = ruptures.Binseg(model="l2").fit(values)
    return algo.predict(pen=_bic_penalty(values))[:-1]


def _bic_penalty(values: np.ndarray) -> float:
    """BIC for a Gaussian mean shift with known variance, in the units of the l2 cost.

    -2 log L = SSR / sigma^2 + const, and each change adds two parameters (its place and
    the new mean), so each costs 2 log(n) there, i.e. 2 sigma^2 log(n) in SSR. sigma is
    the MAD of first differences over sqrt 2, which a level shift barely moves.
    """
    diffs = np.diff(values)
    mad = 1.4826 * np.median(np.abs(diffs - np.median(diffs)))
    sigma = mad / np.sqrt(2.0) if mad > 0 else np.std(diffs) / np.sqrt(2.0)
    return float(2.0 * max(sigma, 1e-12) ** 2 * np.log(len(values)))


DETECTORS: dict[str, Callable[[np.ndarray], list[int]]] = {
    "zero": zero,
    "otava": otava,
    "edivisive": edivisive,
    "ruptures-pelt": ruptures_pelt,
    "ruptures-binseg": ruptures_binseg,
}


# Imported before the clock starts, so a first series does not pay for them.
PACKAGES = {
    "otava": "otava.analysis",
    "edivisive": "signal_processing_algorithms.energy_statistics.energy_statistics",
    "ruptures-pelt": "ruptures",
    "ruptures-binseg": "ruptures",
}


def run_timed(method: str, series: list[list[float]]) -> list[dict[str, object]]:
    detector = DETECTORS[method]
    if method in PACKAGES:
        importlib.import_module(PACKAGES[method])
    results: list[dict[str, object]] = []
    for values in series:
        data = np.asarray(values, dtype=float)
        start = time.process_time()
        found = detector(data)
        results.append({"change_points": found, "seconds": time.process_time() - start})
    return results


def main() -> None:
    request = json.load(sys.stdin)
    json.dump(run_timed(request["method"], request["series"]), sys.stdout)


if __name__ == "__main__":
    main()
