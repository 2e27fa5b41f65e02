"""Judging a tracker's history: each tested commit against the one tested before it,
every series for change points, one regression record per change, the daily number.

Each series' between-run variation is learned from its own tested commits
(track.learned_noise) and given to the neighbour comparison and the daily number's
interval in place of the assumed 1%. With narrowing on, a neighbour pair that the
comparison leaves inconclusive but that passes the looser SCREEN_ALPHA beyond the floor
opens a record too: its confirmation (a fresh interleaved A/B at alpha 0.01) decides it,
so the screen costs runs, never a wrong answer. Pooled windows of tested commits find
the steps one pair is too noisy to show; a screened pair that the data place at a
nearby change is that change's shadow, not a second place for it."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from perfline import git
from perfline.analysis.regressions import MARGIN, record
from perfline.analysis.series import Point, Series, build_series, judge
from perfline.records.metric import Direction, Metric
from perfline.records.status import RegressionStatus
from perfline.store import Regression, Store
from perfline.store.trackers import DailyNumber
from perfline.track.learned_noise import Noise, learn_noise
from perfline.track.machines import Measuring
from perfline.track.tracker_file import TrackerSpec

if TYPE_CHECKING:
    from perfline.stats.changepoint import ChangePoint
    from perfline.stats.two_sample import Comparison

Notify = Callable[[str], None]
# Change points need this many tested commits on each side (stats.changepoint); fewer
# points are judged by the neighbour comparison alone.
_DETECT_MIN_POINTS = 6
# A change point's range (change_span): splits up to this many points from it are
# considered, and kept while their fit is within this of the best one's (the 99% point
# of chi-square with one degree of freedom: a split the data reject at 1% is left out).
SPAN_REACH = 5
SPAN_CHI2 = 6.63
# The screen's level: a pair inconclusive at alpha 0.01 but below this opens a record
# when its kind is narrowed (the confirmation, at 0.01, decides it). At 0.05 about one
# neighbour pair in 20 without a change is screened by chance, a few A/B pairs each
# (bench/track_sim.py counts them); a 3% step at 3% noise is found about twice as often.
SCREEN_ALPHA = 0.05
# The first split's (the first tested commit against the next): nothing will ever be
# tested before it, so no later window or change point looks at it again, and the
# screen is its only way to more runs. A record there is known for good once it exists
# (analysis.regressions.record), so a chance one costs one confirmation in a series'
# life: about 0.07 a series at this level (bench/short_series.py), for a first split
# found in 95-98% of the series instead of 82-94% at SCREEN_ALPHA.
FIRST_SPLIT_SCREEN_ALPHA = 0.2
# Pooled windows (pooled_changes): up to this many tested commits a side, runs the unit.
POOL_POINTS = 3


@dataclass(frozen=True)
class Found:
    regression: Regression
    new: bool


def tracker_series(store: Store, spec: TrackerSpec, repo: Path, where: Measuring,
                   history: Sequence[git.Commit]) -> list[Series]:
    """The tracker's series: its own runs where it measures, of the commits of `history`
    (the branch from `since`: a rewritten branch's old commits are left out, or the two
    histories' runs would be read as one, with steps where they join), in its order."""
    on_branch = {c.sha for c in history}
    values = where.series_values([v for v in store.metric_values()
                                  if v.run.label == spec.name and v.run.kernel_commit in on_branch])
    return build_series(values, repo) if values else []


def judge_history(store: Store, spec: TrackerSpec, tracked: list[Series], notify: Notify) -> list[Found]:
    """Open or update a record for every significant change beyond the floor (series_changes)."""
    found: list[Found] = []
    for series in tracked:
        if series.order != "commit" or series.metric.direction is Direction.NEUTRAL:
            continue
        claimed: list[int] = []
        for change in series_changes(series, spec.floor_pct, spec.narrow):
            good = series.points[change.first - 1].runs[0].kernel_commit
            bad = series.points[change.last].runs[0].kernel_commit
            regression, new = record(store, series, change.point, claimed, tracker=spec.name, good=good, bad=bad)
            claimed.append(regression.id)
            found.append(Found(regression, new))
            if new:
                c = change.point
                how = (f", p {c.p_value:.2g}: screened at {_screen_alpha(c.index):g}, the confirmation decides"
                       if change.screened else "")
                notify(f"{regression.kind} {regression.id}: {series.metric.name} {c.change_pct:+.1f}% "
                       f"[{c.ci_pct[0]:+.1f}, {c.ci_pct[1]:+.1f}] between {str(good)[:12]} and "
                       f"{str(bad)[:12]}{how}")
    return found


@dataclass(frozen=True)
class Change:
    """A change in a tracker's series: where it was found (`point.index`: the first point
    after it), the places it may be at (points `first`..`last`), whether only a screen
    found it (its confirmation is the shorter one)."""

    point: ChangePoint
    first: int
    last: int
    screened: bool


def series_changes(series: Series, floor_pct: float, narrowed: Collection[str]) -> list[Change]:
    """Every significant change beyond the floor in one series in commit order: between
    neighbouring tested commits, between pooled windows of them where narrowing is on
    (pooled_changes), at every change point of a long enough series; screened pairs that
    are a nearby change's shadow left out, changes of one kind whose ranges overlap one."""
    from perfline.stats.counted import compare_counted, counted_floor
    from perfline.stats.two_sample import IMPROVEMENT, REGRESSION

    changes: list[ChangePoint] = []
    screened: set[int] = set()
    noise = series_noise(series)
    # A count's noise is measured from its history too (stats.counted), so one run a
    # commit decides; its floor is at most counted_floor. It is never screened: its
    # comparison has no inconclusive band to screen.
    counted = series.metric.counted
    floor = counted_floor(floor_pct) if counted else floor_pct
    count_noise = _count_noise(series) if counted else None
    for index in range(1, len(series.points)):
        before, after = series.points[index - 1], series.points[index]
        if counted:
            counts = compare_counted(before.values, after.values, series.metric, floor_pct=floor,
                                     history_noise_pct=count_noise)
            judged = (counts, False) if counts.verdict in (REGRESSION, IMPROVEMENT) else None
        else:
            judged = judge_pair(before.values, after.values, series.metric, floor_pct, noise, narrowed,
                                _labels(before), _labels(after), _screen_alpha(index))
        if judged is not None:
            c, screen = judged
            changes.append(_change_at(index, c))
            if screen:
                screened.add(index)
    if narrowed and not counted:
        for change, screen in pooled_changes(series, changes, floor_pct, noise, narrowed):
            changes.append(change)
            if screen:
                screened.add(change.index)
    points = ([c for c in series.change_points() if abs(c.change_pct) > floor]
              if len(series.points) >= _DETECT_MIN_POINTS else [])
    values = [p.values for p in series.points]
    seen = changes + points
    changes = [c for c in changes if c.index not in screened or not _shadow(c, seen, values, noise, series.metric)]
    changes = [_backed(c, points) if c.index in screened else c for c in changes]
    screened = {i for i in screened if not _near(i, points)}
    known = {c.index for c in changes}
    changes += [c for c in points if c.index not in known]
    return [Change(change, first, last, change.index in screened)
            for change, first, last in change_ranges(changes, values, noise, series.metric)]


def change_ranges(changes: list[ChangePoint], points: Sequence[Sequence[float]], noise: Noise, metric: Metric
                  ) -> list[tuple[ChangePoint, int, int]]:
    """Each change with its range (first, last: the places it may be at). Where a change
    is, is an estimate: a small step in noise can show between the pair after it, or a
    change point one place off, so the range spans every place the data cannot tell
    from it (change_span), so that it holds the commit. Changes of one kind whose ranges
    overlap are one change (the strongest's figures, the ranges' union): two records
    would confirm and bisect the same commits twice."""
    merged: list[tuple[ChangePoint, int, int]] = []
    for change in sorted(changes, key=lambda c: c.index):
        first, last = change_span(points, change.index, noise)
        if merged and first <= merged[-1][2] and judge(metric, merged[-1][0].change_pct) == judge(
                metric, change.change_pct):
            before, low, high = merged.pop()
            change = max(before, change, key=lambda c: c.strength)
            first, last = min(first, low), max(last, high)
        merged.append((change, first, last))
    return merged


def _change_at(index: int, c: Comparison) -> ChangePoint:
    """A pair's (or pooled windows') comparison as a change found at `index`."""
    from perfline.stats.changepoint import ChangePoint  # scipy: only when judging

    return ChangePoint(index, c.change_pct, c.ci_pct, -math.log10(max(c.p_value, 1e-300)), c.p_value)


def _shadow(change: ChangePoint, changes: list[ChangePoint], points: Sequence[Sequence[float]], noise: Noise,
            metric: Metric) -> bool:
    """Whether a screened pair is only another change of its kind seen from next door:
    the two-level fit rejects the pair's own place (at 1%, where the screen passed at
    5%) and keeps the other change's. Beside a real step, a pair without a change is
    screened by chance about one time in 20; merged with the step's, its range would
    grow by a pair the data place no change in."""
    kept = _fitting_splits(points, change.index, noise)
    return change.index not in kept and any(
        other.index != change.index and other.index in kept
        and judge(metric, other.change_pct) == judge(metric, change.change_pct) for other in changes)


def _near(index: int, points: list[ChangePoint]) -> ChangePoint | None:
    """The nearest change point within MARGIN points of `index`, if any."""
    near = [c for c in points if abs(c.index - index) <= MARGIN]
    return min(near, key=lambda c: abs(c.index - index)) if near else None


def _backed(change: ChangePoint, points: list[ChangePoint]) -> ChangePoint:
    """A screened pair that a change point near it backs is that change point's finding
    (its estimate and strength, at the pair's place): not a screened one any more."""
    found = _near(change.index, points)
    return change if found is None else replace(found, index=change.index)


def pooled_changes(series: Series, changes: Sequence[ChangePoint], floor_pct: float, noise: Noise,
                   narrowed: Collection[str]) -> list[tuple[ChangePoint, bool]]:
    """Changes that one pair of neighbours is too noisy to show: at each split with no
    change found within POOL_POINTS of it, the runs of up to POOL_POINTS tested commits
    before against those after (each run's mean a value, their spread pooled with the
    learned between-run variation once there is one: stats.two_sample._moderated),
    judged as a neighbour pair is (judge_pair). A window of one run (the first tested
    commit, the head) is given the series' variation, as a neighbour pair's side is: the
    first split has nothing before it, ever, so its window is all there will be. Short
    histories need them most: twelve tested commits are too few for a change point (the
    rank scan's permutation p of 6 points against 6 is at best 2 in 924, above its
    0.001), and one run a side given the assumed between-run noise can leave an 8% step
    at p 0.1. So they screen the `narrowed` kinds (SCREEN_ALPHA) only while the series'
    noise is still assumed (the first split always, FIRST_SPLIT_SCREEN_ALPHA); after that
    the strict level alone opens a record (the windows look again at pairs already
    judged, and a screen at every split of a long history would add about two false
    records a hundred tested commits, 20 pairs each). (change, screened) each."""

    candidates: list[tuple[ChangePoint, bool]] = []
    points = series.points
    for index in range(1, len(points)):
        before, after = points[max(0, index - POOL_POINTS):index], points[index:index + POOL_POINTS]
        screening = narrowed if index == 1 or not noise.learned else ()
        judged = judge_pair([v for p in before for v in p.values], [v for p in after for v in p.values],
                            series.metric, floor_pct, noise, screening,
                            [r for p in before for r in _labels(p)], [r for p in after for r in _labels(p)],
                            _screen_alpha(index))
        if judged is not None:
            c, screen = judged
            candidates.append((_change_at(index, c), screen))
    # Windows overlap: the strongest of neighbouring splits is the change.
    found: list[tuple[ChangePoint, bool]] = []
    for change, screen in sorted(candidates, key=lambda f: -f[0].strength):
        if all(abs(c.index - change.index) >= POOL_POINTS for c in (*changes, *(f for f, _ in found))):
            found.append((change, screen))
    return found


def _screen_alpha(index: int) -> float:
    """The screen's level at the split before point `index`."""
    return FIRST_SPLIT_SCREEN_ALPHA if index == 1 else SCREEN_ALPHA


def judge_pair(before: Sequence[float], after: Sequence[float], metric: Metric, floor_pct: float, noise: Noise,
               screened_kinds: Collection[str], before_runs: Sequence[int] | None = None,
               after_runs: Sequence[int] | None = None, screen_alpha: float = SCREEN_ALPHA
               ) -> tuple[Comparison, bool] | None:
    """Whether two neighbouring tested commits open a record: the comparison (one run a
    side given the series' between-run variation), and whether only the screen opened
    it (a kind in `screened_kinds`, inconclusive at 0.01 but p < `screen_alpha` beyond
    the floor); None when they open none. Without run labels each side is one run."""
    from perfline.stats.two_sample import IMPROVEMENT, INCONCLUSIVE, REGRESSION, compare

    c = compare(before, after, metric, floor_pct=floor_pct, base_runs=before_runs or [0] * len(before),
                other_runs=after_runs or [1] * len(after), between_run_cv_pct=noise.between_pct,
                between_run_df=noise.df)
    if c.verdict in (REGRESSION, IMPROVEMENT):
        return c, False
    screen = (c.verdict == INCONCLUSIVE and c.p_value < screen_alpha and abs(c.change_pct) > floor_pct
              and judge(metric, c.change_pct) in screened_kinds)
    return (c, True) if screen else None


def change_span(points: Sequence[Sequence[float]], index: int, noise: Noise) -> tuple[int, int]:
    """The places a change found at `index` may be at: every split k (the first point
    after the change) within SPAN_REACH of it whose two-level fit over the points
    around it is worse than the best by at most SPAN_CHI2 (weighted least squares of the
    log means, each point's variance its sampling variance plus the series' between-run
    variance). A big step is placed at one split; a small one in noisy data at several,
    and the range to confirm and bisect then holds them all. (first, last) splits."""
    near = _fitting_splits(points, index, noise)
    return min(*near, index), max(*near, index)


def _fitting_splits(points: Sequence[Sequence[float]], index: int, noise: Noise) -> list[int]:
    """The splits within SPAN_REACH of `index` whose two-level fit is within SPAN_CHI2 of
    the best one's (change_span); [index] where no fit can be made."""
    low, high = max(1, index - SPAN_REACH), min(len(points) - 1, index + SPAN_REACH)
    window = [np.asarray(v, dtype=float) for v in points[low - 1:high + 1]]
    if any((v <= 0).any() for v in window):
        return [index]
    levels = np.log([v.mean() for v in window])
    between = (noise.between_pct / 100) ** 2
    weights = 1 / np.array([(v.var(ddof=1) / len(v) / v.mean() ** 2 if len(v) > 1 else 0.0) + between
                            for v in window])
    if not np.isfinite(weights).all():
        return [index]

    def misfit(split: int) -> float:
        cost = 0.0
        for part in (slice(0, split), slice(split, None)):
            level = np.average(levels[part], weights=weights[part])
            cost += float(np.sum(weights[part] * (levels[part] - level) ** 2))
        return cost

    fits = {k: misfit(k - low + 1) for k in range(low, high + 1)}
    best = min(fits.values())
    return [k for k, cost in fits.items() if cost - best <= SPAN_CHI2]


def series_noise(series: Series) -> Noise:
    """The series' between-run variation, learned from its tested commits (one run's
    values each: a commit tested twice pools its runs and is left out)."""
    from perfline.stats.two_sample import ASSUMED_BETWEEN_RUN_CV_PCT

    return learn_noise([p.values for p in series.points if len(p.runs) == 1], ASSUMED_BETWEEN_RUN_CV_PCT)


def _count_noise(series: Series) -> float | None:
    """A counted series' noise (relative sd of one value, %) from its whole history, one
    level a tested commit (stats.counted.history_noise); None while it is too short."""
    from perfline.stats.counted import history_noise  # scipy: only when judging

    return history_noise([float(np.mean(p.values)) for p in series.points])


def _labels(point: Point) -> list[int]:
    """The run of each of a point's values (they are in run order): runs are the unit."""
    return [run.id for run in point.runs for _ in range(run.samples)]


def open_regressions(store: Store, name: str, kinds: tuple[str, ...] = ("regression",)) -> list[Regression]:
    """The tracker's records of `kinds` still to act on (not judged false, not fixed),
    regressions first (a short budget narrows them before improvements), oldest first."""
    done = {RegressionStatus.FALSE_ALARM, RegressionStatus.FIXED}
    found = [r for r in store.regressions(tracker=name) if r.kind in kinds and r.status not in done]
    return sorted(found, key=lambda r: (r.kind != "regression", r.id))


def daily_numbers(spec: TrackerSpec, repo: Path, tracked: list[Series], history: list[git.Commit]
                  ) -> list[DailyNumber]:
    """The tracker's one number per tested commit: the geometric mean over its series of
    each one's ratio to the reference commit (the first tested, or `reference:`), turned
    so that above 100 is better, times 100. Its 95% interval comes from the delta-method
    variances of the log means, with each series' between-run variation added per side
    (learned from its history, else the assumed 1%), as a comparison of one run a side does."""
    from scipy import stats  # only when the numbers are made

    series = [s for s in tracked
              if s.order == "commit" and s.metric.direction is not Direction.NEUTRAL
              and spec.number in ("all", "counted" if s.metric.counted else "timed")]
    position = {c.sha: i for i, c in enumerate(history)}
    by_commit = [{p.runs[0].kernel_commit: p for p in s.points} for s in series]
    between = [(series_noise(s).between_pct / 100) ** 2 for s in series]
    commits = sorted({sha for points in by_commit for sha in points if sha in position}, key=position.__getitem__)
    if not commits:
        return []
    reference = git.resolve(repo, spec.reference) if spec.reference else commits[0]
    # A counted series' noise is its history's (stats.counted), not the assumed 1%.
    noises = [_count_noise(s) if s.metric.counted else None for s in series]
    z = float(stats.norm.ppf(0.975))
    numbers = []
    for sha in commits:
        logs, variance = [], 0.0
        for s, points, extra, counted_noise in zip(series, by_commit, between, noises, strict=True):
            if sha not in points or reference not in points:
                continue
            here, there = np.asarray(points[sha].values), np.asarray(points[reference].values)
            sign = 1.0 if s.metric.direction is Direction.HIGHER else -1.0
            logs.append(sign * math.log(here.mean() / there.mean()))
            if sha != reference:
                variance += _log_mean_var(here, extra, counted_noise) + _log_mean_var(there, extra, counted_noise)
        if not logs:
            continue
        value, margin = float(np.mean(logs)), z * math.sqrt(variance) / len(logs)
        tested = min(run.started_at for points in by_commit if sha in points for run in points[sha].runs)
        commit = history[position[sha]]
        numbers.append(DailyNumber(sha, position[sha], commit.subject, 100 * math.exp(value),
                                   100 * math.exp(value - margin), 100 * math.exp(value + margin), tested))
    return numbers


def _log_mean_var(values: NDArray[np.float64], between: float, noise_pct: float | None = None) -> float:
    """Var(log mean) by the delta method, plus the between-run variance one run cannot show;
    for a count, the variance of its measured noise (`noise_pct`, from the history) instead."""
    if noise_pct is not None:
        spread = float(values.var(ddof=1) / values.mean() ** 2) if len(values) >= 2 else 0.0
        return max(spread, (noise_pct / 100) ** 2) / len(values)
    if len(values) < 2:
        return between
    return float(values.var(ddof=1) / len(values) / values.mean() ** 2) + between
