"""Judging a tracker's history: each tested commit against the one tested before it,
every series for change points, one regression record per change, the daily number."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from perfline import git
from perfline.analysis.regressions import record
from perfline.analysis.series import Point, Series, build_series
from perfline.records.metric import Direction
from perfline.records.status import RegressionStatus
from perfline.store import Regression, Store
from perfline.store.trackers import DailyNumber
from perfline.track.machines import Measuring
from perfline.track.tracker_file import TrackerSpec

Notify = Callable[[str], None]
# Change points need this many tested commits on each side (stats.changepoint); fewer
# points are judged by the neighbour comparison alone.
_DETECT_MIN_POINTS = 6


@dataclass(frozen=True)
class Found:
    regression: Regression
    new: bool


def tracker_series(store: Store, spec: TrackerSpec, repo: Path, where: Measuring) -> list[Series]:
    """The tracker's series: its own runs where it measures, in the branch's order."""
    values = where.series_values([v for v in store.metric_values() if v.run.label == spec.name])
    return build_series(values, repo) if values else []


def judge_history(store: Store, spec: TrackerSpec, tracked: list[Series], notify: Notify) -> list[Found]:
    """Open or update a record for every significant change beyond the floor: between
    neighbouring tested commits, and at every change point of a long enough series."""
    from perfline.stats.changepoint import ChangePoint  # scipy: only when judging
    from perfline.stats.counted import compare_counted, counted_floor, history_noise
    from perfline.stats.two_sample import IMPROVEMENT, REGRESSION, compare

    found: list[Found] = []
    for series in tracked:
        if series.order != "commit" or series.metric.direction is Direction.NEUTRAL:
            continue
        changes: list[ChangePoint] = []
        # A count's noise is learnt from its history too (stats.counted), so one run a
        # commit decides; its floor is at most counted_floor.
        counted = series.metric.counted
        floor = counted_floor(spec.floor_pct) if counted else spec.floor_pct
        noise = history_noise([float(np.mean(p.values)) for p in series.points]) if counted else None
        for index in range(1, len(series.points)):
            before, after = series.points[index - 1], series.points[index]
            c = (compare_counted(before.values, after.values, series.metric, floor_pct=floor, history_noise_pct=noise)
                 if counted else
                 compare(before.values, after.values, series.metric, floor_pct=spec.floor_pct,
                         base_runs=_labels(before), other_runs=_labels(after)))
            if c.verdict in (REGRESSION, IMPROVEMENT):
                changes.append(ChangePoint(index, c.change_pct, c.ci_pct, -math.log10(max(c.p_value, 1e-300)),
                                           c.p_value))
        if len(series.points) >= _DETECT_MIN_POINTS:
            known = {c.index for c in changes}
            changes += [c for c in series.change_points() if c.index not in known
                        and abs(c.change_pct) > floor]
        claimed: list[int] = []
        for change in sorted(changes, key=lambda c: c.index):
            good, bad = (series.points[change.index + k].runs[0].kernel_commit for k in (-1, 0))
            regression, new = record(store, series, change, claimed, tracker=spec.name, good=good, bad=bad)
            claimed.append(regression.id)
            found.append(Found(regression, new))
            if new:
                notify(f"{regression.kind} {regression.id}: {series.metric.name} {change.change_pct:+.1f}% "
                       f"[{change.ci_pct[0]:+.1f}, {change.ci_pct[1]:+.1f}] between {str(good)[:12]} and "
                       f"{str(bad)[:12]}")
    return found


def _labels(point: Point) -> list[int]:
    """The run of each of a point's values (they are in run order): runs are the unit."""
    return [run.id for run in point.runs for _ in range(run.samples)]


def open_regressions(store: Store, name: str) -> list[Regression]:
    """The tracker's regressions still to act on (not judged false, not fixed)."""
    done = {RegressionStatus.FALSE_ALARM, RegressionStatus.FIXED}
    return [r for r in store.regressions(tracker=name) if r.kind == "regression" and r.status not in done]


def daily_numbers(spec: TrackerSpec, repo: Path, tracked: list[Series], history: list[git.Commit]
                  ) -> list[DailyNumber]:
    """The tracker's one number per tested commit: the geometric mean over its series of
    each one's ratio to the reference commit (the first tested, or `reference:`), turned
    so that above 100 is better, times 100. Its 95% interval comes from the delta-method
    variances of the log means, with the assumed between-run 1% added per side, as a
    comparison of one run a side does."""
    from scipy import stats  # only when the numbers are made

    from perfline.stats.counted import history_noise

    series = [s for s in tracked
              if s.order == "commit" and s.metric.direction is not Direction.NEUTRAL
              and spec.number in ("all", "counted" if s.metric.counted else "timed")]
    position = {c.sha: i for i, c in enumerate(history)}
    by_commit = [{p.runs[0].kernel_commit: p for p in s.points} for s in series]
    commits = sorted({sha for points in by_commit for sha in points if sha in position}, key=position.__getitem__)
    if not commits:
        return []
    reference = git.resolve(repo, spec.reference) if spec.reference else commits[0]
    # A counted series' noise is its history's (stats.counted), not the assumed 1%.
    noises = [history_noise([float(np.mean(p.values)) for p in s.points]) if s.metric.counted else None
              for s in series]
    z = float(stats.norm.ppf(0.975))
    numbers = []
    for sha in commits:
        logs, variance = [], 0.0
        for s, points, noise in zip(series, by_commit, noises, strict=True):
            if sha not in points or reference not in points:
                continue
            here, there = np.asarray(points[sha].values), np.asarray(points[reference].values)
            sign = 1.0 if s.metric.direction is Direction.HIGHER else -1.0
            logs.append(sign * math.log(here.mean() / there.mean()))
            if sha != reference:
                variance += _log_mean_var(here, noise) + _log_mean_var(there, noise)
        if not logs:
            continue
        value, margin = float(np.mean(logs)), z * math.sqrt(variance) / len(logs)
        tested = min(run.started_at for points in by_commit if sha in points for run in points[sha].runs)
        commit = history[position[sha]]
        numbers.append(DailyNumber(sha, position[sha], commit.subject, 100 * math.exp(value),
                                   100 * math.exp(value - margin), 100 * math.exp(value + margin), tested))
    return numbers


def _log_mean_var(values: NDArray[np.float64], noise_pct: float | None = None) -> float:
    """Var(log mean) by the delta method, plus the between-run variance one run cannot show;
    for a count, the variance of its measured noise (`noise_pct`, from the history) instead."""
    from perfline.stats.two_sample import ASSUMED_BETWEEN_RUN_CV_PCT

    if noise_pct is not None:
        spread = float(values.var(ddof=1) / values.mean() ** 2) if len(values) >= 2 else 0.0
        return max(spread, (noise_pct / 100) ** 2) / len(values)
    assumed = (ASSUMED_BETWEEN_RUN_CV_PCT / 100) ** 2
    if len(values) < 2:
        return assumed
    return float(values.var(ddof=1) / len(values) / values.mean() ** 2) + assumed
