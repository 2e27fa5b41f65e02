"""A noisy bisection as a state machine: samples in, next commit to measure out.

`Bisection` holds nothing but the samples and the untestable commits, and derives
everything else from them, so a bisection interrupted at any point is resumed by
replaying what the store recorded: the same samples give the same posterior and the same
next probe. It never measures or builds anything itself.

The confirmation A/B of the culprit against its parent is part of the same machine: once
the posterior reaches its confidence, the pair is fixed and the next probes are the
A/B's. Their samples are the A/B's alone: the posterior stays where it stood, so the
A/B's test is on samples that played no part in choosing the pair (confirm.py says why
that matters), and a sample is the A/B's exactly when the samples before it made the
posterior confident, which replaying them in order finds again. So one loop of
next_probe/observe runs the whole bisection, every run it makes is counted, and a
resumed bisection continues an A/B where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy import stats

from perfline.bisect import posterior as model
from perfline.bisect.confirm import ABConfirmation, Confirmation, Decision
from perfline.bisect.strategy import group_heads, group_posterior, informative_probe
from perfline.records.metric import Direction
from perfline.records.status import BisectionStatus

Observation = tuple[int, float]

# Endpoint z (step / its standard error) below which more endpoint runs are taken before
# bisecting: a step that does not stand out of the endpoint noise yet would make the
# first probes coin flips.
MIN_SEPARATION = 2.0
# Endpoint z below which, after max_endpoint_runs each, the range is declared to have no
# change. Deliberately low: wrongly refusing a real step costs the user more than a
# bisection that ends on its budget with a low probability.
NO_CHANGE_Z = 1.0


class Kind(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    CHANGE = "change"  # the metric has no better direction


@dataclass(frozen=True)
class BisectResult:
    status: BisectionStatus
    # The first commit measured bad after the last one measured good: the culprit when
    # it is the only suspect, else the last commit of the range.
    culprit: int
    suspects: tuple[int, ...]  # untestable commits just before the culprit, and the culprit
    probability: float  # posterior probability that the first bad commit is a suspect
    change_pct: float  # bad level vs good level
    ci_pct: tuple[float, float]  # 95%
    kind: Kind
    runs: int
    # The A/B of fresh samples against the parent, once the posterior reached the confidence.
    confirmation: Confirmation | None

    @property
    def parent(self) -> int:
        """The last commit before the suspects: the good side of the step."""
        return self.suspects[0] - 1

    @property
    def exact(self) -> bool:
        """Whether the answer is one commit: its parent was measured, not skipped."""
        return len(self.suspects) == 1


def _kind(change_pct: float, direction: Direction) -> Kind:
    if direction is Direction.NEUTRAL:
        return Kind.CHANGE
    worse = change_pct > 0 if direction is Direction.LOWER else change_pct < 0
    return Kind.REGRESSION if worse else Kind.IMPROVEMENT


@dataclass(frozen=True)
class _State:
    """Everything derived from the samples; recomputed once after each change."""

    commits: model.IntArray
    y: model.FloatArray  # log values
    endpoint_counts: tuple[int, int]
    endpoint_z: float  # the endpoint step in units of its standard error
    posterior: model.FloatArray
    grouped: model.FloatArray  # posterior mass per group of indistinguishable commits
    weights: model.FloatArray | None  # outlier weights; None before both endpoints ran

    @classmethod
    def of(
        cls, n_commits: int, commits: list[int], values: list[float], testable: np.ndarray
    ) -> _State:
        k = np.asarray(commits, dtype=np.intp)
        y = np.log(np.asarray(values, dtype=float))
        counts = (int((k == 0).sum()), int((k == n_commits - 1).sum()))
        if min(counts) == 0:
            posterior = np.full(n_commits, 1.0 / (n_commits - 1))
            posterior[0] = 0.0
            grouped = group_posterior(posterior, testable)
            return cls(k, y, counts, 0.0, posterior, grouped, None)
        ends = model.endpoint_levels(n_commits, k, y)
        z = abs(ends.bad - ends.good) / ends.step_stderr
        fit = model.fit(n_commits, k, y)
        grouped = group_posterior(fit.posterior, testable)
        return cls(k, y, counts, z, fit.posterior, grouped, fit.weights)


class Bisection:
    """Bayesian bisection of commits 0 (good) .. n_commits-1 (bad) under noise.

    `prior_obs` are samples recorded before this bisection (e.g. stored runs of an
    endpoint): evidence for the posterior like any other, but they do not count as runs.
    The confirmation A/B uses only samples taken after the posterior reached
    `confidence`, so neither these nor the bisection's own probes.
    """

    def __init__(
        self,
        n_commits: int,
        direction: Direction = Direction.LOWER,
        *,
        prior_obs: Iterable[Observation] = (),
        untestable: Iterable[int] = (),
        confidence: float = 0.995,
        max_runs: int = 200,
        endpoint_runs: int = 2,
        max_endpoint_runs: int = 10,
    ) -> None:
        if n_commits < 2:
            raise ValueError("a bisection needs a good and a bad commit")
        self.n_commits, self.direction = n_commits, direction
        self.confidence, self.max_runs = confidence, max_runs
        self.endpoint_runs, self.max_endpoint_runs = endpoint_runs, max_endpoint_runs
        self._testable = np.ones(n_commits, dtype=bool)
        # The posterior's samples: prior_obs and the probes before the confidence.
        self._commits: list[int] = []
        self._values: list[float] = []
        self._runs = 0
        self._derived: _State | None = None
        self._ab: ABConfirmation | None = None
        for commit in untestable:
            self.mark_untestable(commit)
        for commit, value in prior_obs:
            self._add(commit, value)

    # -- inputs ---------------------------------------------------------------------

    def observe(self, commit: int, value: float) -> None:
        """Record one sample of the metric at `commit` (one benchmark run): the
        posterior's, or once it is confident the confirmation A/B's."""
        if self._confident():
            self._check_index(commit)
            self._confirmation().observe(commit, value)
        else:
            self._add(commit, value)
        self._runs += 1

    def mark_untestable(self, commit: int) -> None:
        """The commit cannot be measured (e.g. its build failed): it carries no information."""
        self._check_index(commit)
        if commit in (0, self.n_commits - 1):
            raise ValueError("the good and bad endpoints must be testable")
        if commit in self._commits:
            raise ValueError(f"commit {commit} already has samples")
        if self._confident():
            # It would move the posterior the confirmation's pair was chosen by.
            raise ValueError("the posterior reached its confidence: only the culprit and its parent are measured")
        self._testable[commit] = False
        self._derived = None

    def _add(self, commit: int, value: float) -> None:
        self._check_index(commit)
        if not self._testable[commit]:
            raise ValueError(f"commit {commit} is marked untestable")
        # The model works on log values; a benchmark score or time is positive.
        if not value > 0 or not np.isfinite(value):
            raise ValueError(f"sample values must be positive and finite, got {value!r}")
        self._commits.append(commit)
        self._values.append(float(value))
        self._derived = None

    def _check_index(self, commit: int) -> None:
        if not 0 <= commit < self.n_commits:
            raise ValueError(f"commit index {commit} outside 0..{self.n_commits - 1}")

    # -- derived state ----------------------------------------------------------------

    @property
    def runs(self) -> int:
        return self._runs

    @property
    def untestable(self) -> tuple[int, ...]:
        return tuple(int(k) for k in np.flatnonzero(~self._testable))

    def samples_at(self, commit: int) -> list[float]:
        """Every sample at `commit`, recorded before this bisection or taken by it (the
        posterior's, then the confirmation's)."""
        at = [v for k, v in zip(self._commits, self._values, strict=False) if k == commit]
        return at + (self._ab.taken(commit) if self._ab is not None else [])

    def _state(self) -> _State:
        if self._derived is None:
            self._derived = _State.of(self.n_commits, self._commits, self._values, self._testable)
        return self._derived

    def _fewer_endpoint(self) -> int:
        good_n, bad_n = self._state().endpoint_counts
        return 0 if good_n <= bad_n else self.n_commits - 1

    def _in_endpoint_phase(self) -> bool:
        state = self._state()
        least = min(state.endpoint_counts)
        if least < self.endpoint_runs:
            return True
        return least < self.max_endpoint_runs and state.endpoint_z < MIN_SEPARATION

    def posterior(self) -> np.ndarray:
        """P(first bad commit = k) for k = 0..N-1 (entry 0 is 0: commit 0 is good)."""
        return self._state().posterior.copy()

    def _grouped(self) -> np.ndarray:
        return self._state().grouped

    def _suspects(self, culprit: int) -> tuple[int, ...]:
        heads = group_heads(self._testable)
        return tuple(int(k) for k in np.flatnonzero(heads == culprit) if k >= 1)

    def _confident(self) -> bool:
        return not self._in_endpoint_phase() and self._grouped().max() >= self.confidence

    def _confirmation(self) -> ABConfirmation:
        """The A/B of the most probable culprit against its parent, made once when the
        posterior is confident (its samples are then final)."""
        if self._ab is None:
            culprit = int(np.argmax(self._grouped()))
            increase = self._change(culprit)[0] > 0
            self._ab = ABConfirmation(self._suspects(culprit)[0] - 1, culprit, increase)
        return self._ab

    @property
    def confirming(self) -> bool:
        """Whether the next probe is one of the confirmation A/B's."""
        return self.status() is BisectionStatus.RUNNING and self._confident()

    def status(self) -> BisectionStatus:
        state = self._state()
        if min(state.endpoint_counts) >= self.max_endpoint_runs and state.endpoint_z < NO_CHANGE_Z:
            return BisectionStatus.NO_CHANGE
        if self._confident():
            decision = self._confirmation().result().decision
            if decision is Decision.CONFIRMED:
                exact = len(self._suspects(self._confirmation().culprit)) == 1
                return BisectionStatus.FOUND if exact else BisectionStatus.RANGE
            if decision is Decision.NOT_CONFIRMED:
                return BisectionStatus.UNCONFIRMED
        if self._runs >= self.max_runs:
            return BisectionStatus.BUDGET
        return BisectionStatus.RUNNING

    def next_probe(self) -> int | None:
        """The commit to measure next, or None when the bisection is over."""
        if self.status() is not BisectionStatus.RUNNING:
            return None
        # Both endpoints first: they fix the levels and the noise every probe is judged by.
        if self._in_endpoint_phase():
            return self._fewer_endpoint()
        if self._confident():
            return self._confirmation().next_probe()
        state = self._state()
        assert state.weights is not None  # both endpoints have samples after their phase
        return informative_probe(state.posterior, self._testable, state.commits, state.y, state.weights)

    def result(self) -> BisectResult:
        """The most probable culprit so far, with the change between the two levels."""
        grouped = self._grouped()
        culprit = int(np.argmax(grouped))
        change_pct, ci_pct = self._change(culprit)
        return BisectResult(
            status=self.status(),
            culprit=culprit,
            suspects=self._suspects(culprit),
            probability=float(grouped[culprit]),
            change_pct=change_pct,
            ci_pct=ci_pct,
            kind=_kind(change_pct, self.direction),
            runs=self._runs,
            confirmation=self._confirmation().result() if self._confident() else None,
        )

    def _change(self, culprit: int) -> tuple[float, tuple[float, float]]:
        """Bad vs good level with a 95% t interval, the posterior's samples split at `culprit`."""
        state = self._state()
        if state.weights is None:
            nan = float("nan")
            return nan, (nan, nan)
        levels = model.levels_at(culprit, state.commits, state.y, state.weights)
        step = levels.bad - levels.good
        half = float(stats.t.ppf(0.975, levels.dof)) * levels.step_stderr
        return model.percent(step), (model.percent(step - half), model.percent(step + half))
