"""A noisy bisection as a state machine: samples in, next commit to measure out.

`Bisection` holds nothing but the samples and the untestable commits, and derives
everything else from them, so a bisection interrupted at any point is resumed by
replaying what the store recorded: the same samples give the same posterior and the same
next probe. It never measures or builds anything itself.

The confirmation A/B of the culprit against its parent is part of the same machine: once
the posterior reaches its confidence, the pair is fixed and the next probes are the
A/B's. The A/B's test is on samples taken after the pair was chosen, so they played no
part in choosing it (confirm.py says why that matters); they are evidence for the
posterior too, which therefore keeps learning while the A/B runs. When the posterior
leaves the pair, the A/B is stopped (not confirmed); after an A/B that did not confirm,
probing goes on from the posterior with its samples, for one more A/B (more when they
were stopped before their first look: CONFIRMATION_BUDGET). A sample
is an A/B's exactly when the samples before it started that A/B and did not end it,
which replaying them in order finds again. So one loop of next_probe/observe runs the
whole bisection, every run it makes is counted, and a resumed bisection continues an
A/B where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy.special import stdtrit

from perfline.bisect import posterior as model
from perfline.bisect.confirm import ALPHA, ABConfirmation, Confirmation, Decision
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
# The posterior at which the A/B starts. Its samples are the probes the posterior needs
# next anyway (the culprit and its parent), so starting before 0.995 overlaps the A/B with
# the end of the bisection: at 2% noise 48.1 runs at 0.995, 43.5 at 0.95, 42.1 at 0.9,
# 40.7 at 0.8 but 99.0% exact (200 trials each, bench/bisect_sim.py); a wrong pair is
# still confirmed at most at the A/B's alpha.
CONFIRM_FROM = 0.9
# The confirmation's error budget over a bisection: twice the A/B's alpha. Each A/B
# confirms a wrong pair (an A/A pair) with probability at most alpha, counted as spent
# from its first look (none if it is stopped before), so a wrong `found` is at most this
# share of the posterior's wrong pairs. An A/B starts only while a whole alpha is left:
# the first one, and one more after it.
CONFIRMATION_BUDGET = 2 * ALPHA
# The A/B is stopped once the posterior's mass on its culprit falls below this: the
# samples say the pair is not the step.
LEFT_PAIR = 0.5


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
    # The last A/B of fresh samples against the parent (None before the first started).
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
    An A/B starts when the most probable group reaches `confidence`; it uses only
    samples taken after that, so neither these nor the bisection's own probes.
    """

    def __init__(
        self,
        n_commits: int,
        direction: Direction = Direction.LOWER,
        *,
        prior_obs: Iterable[Observation] = (),
        untestable: Iterable[int] = (),
        confidence: float = CONFIRM_FROM,
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
        # The posterior's samples: prior_obs, the probes and the A/Bs' samples.
        self._commits: list[int] = []
        self._values: list[float] = []
        self._runs = 0
        self._derived: _State | None = None
        # The confirmation A/Bs in the order started; only the last may be running.
        self._abs: list[ABConfirmation] = []
        for commit in untestable:
            self.mark_untestable(commit)
        for commit, value in prior_obs:
            self._add(commit, value)
        self._confirm_or_stop()

    # -- inputs ---------------------------------------------------------------------

    def observe(self, commit: int, value: float) -> None:
        """Record one sample of the metric at `commit` (one benchmark run): the
        posterior's, and while an A/B runs that A/B's too."""
        self._check_index(commit)
        if (ab := self._running_ab()) is not None:
            ab.observe(commit, value)
        self._add(commit, value)
        self._runs += 1
        self._confirm_or_stop()

    def mark_untestable(self, commit: int) -> None:
        """The commit cannot be measured (e.g. its build failed): it carries no information."""
        self._check_index(commit)
        if commit in (0, self.n_commits - 1):
            raise ValueError("the good and bad endpoints must be testable")
        if commit in self._commits:
            raise ValueError(f"commit {commit} already has samples")
        if (ab := self._running_ab()) is not None:
            if commit not in (ab.parent, ab.culprit):
                raise ValueError("an A/B is running: only the culprit and its parent are measured")
            ab.stop()  # a side that cannot be measured: the A/B cannot go on
        self._testable[commit] = False
        self._derived = None
        self._confirm_or_stop()

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
        """Every sample at `commit`, recorded before this bisection or taken by it."""
        return [v for k, v in zip(self._commits, self._values, strict=False) if k == commit]

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

    # -- the confirmation A/Bs ------------------------------------------------------------

    def _running_ab(self) -> ABConfirmation | None:
        if self._abs and self._abs[-1].result().decision is Decision.PENDING:
            return self._abs[-1]
        return None

    def _confirm_or_stop(self) -> None:
        """After every change: stop the running A/B once the posterior left its pair, and
        start the next one once the posterior is confident and A/Bs are left."""
        if (ab := self._running_ab()) is not None:
            if self._grouped()[ab.culprit] >= LEFT_PAIR:
                return
            ab.stop()
        if self._abs and self._abs[-1].result().decision is Decision.CONFIRMED:
            return
        if self._may_confirm() and self._confident() and self._runs < self.max_runs:
            culprit = int(np.argmax(self._grouped()))
            levels = self._levels(culprit)
            assert levels is not None  # confident: both endpoints have samples
            step = levels.bad - levels.good
            self._abs.append(ABConfirmation(self._suspects(culprit)[0] - 1, culprit, step > 0,
                                            effect=abs(step) / levels.scale))

    def _may_confirm(self) -> bool:
        """Whether a new A/B may start: a whole alpha is left of the budget."""
        spent = sum(ab.spent() for ab in self._abs)
        return CONFIRMATION_BUDGET - spent >= ALPHA - 1e-12

    def _confirmation(self) -> Confirmation | None:
        """The last A/B's result, None before the first one started."""
        return self._abs[-1].result() if self._abs else None

    @property
    def confirming(self) -> bool:
        """Whether the next probe is one of the confirmation A/B's."""
        return self.status() is BisectionStatus.RUNNING and self._running_ab() is not None

    def status(self) -> BisectionStatus:
        state = self._state()
        if min(state.endpoint_counts) >= self.max_endpoint_runs and state.endpoint_z < NO_CHANGE_Z:
            return BisectionStatus.NO_CHANGE
        if (last := self._confirmation()) is not None:
            if last.decision is Decision.CONFIRMED:
                exact = len(self._suspects(self._answer())) == 1
                return BisectionStatus.FOUND if exact else BisectionStatus.RANGE
            # No A/B is left: the end, once the posterior is sure again of a culprit (an A/B
            # stopped early left it unsure) or when the last A/B ran to its last look.
            if (last.decision is Decision.NOT_CONFIRMED and not self._may_confirm()
                    and (self._confident() or self._abs[-1].ran_out())):
                return BisectionStatus.UNCONFIRMED
        if self._runs >= self.max_runs:
            return BisectionStatus.BUDGET
        return BisectionStatus.RUNNING

    def next_probe(self) -> int | None:
        """The commit to measure next, or None when the bisection is over."""
        if self.status() is not BisectionStatus.RUNNING:
            return None
        # A running A/B measures only its own pair until it ends (the posterior left the pair
        # or it decided), even when the endpoints' separation fell back under the threshold
        # with the A/B's samples at an endpoint: endpoint runs resume after it.
        if (ab := self._running_ab()) is not None:
            return ab.next_probe()
        # Both endpoints first: they fix the levels and the noise every probe is judged by.
        if self._in_endpoint_phase():
            return self._fewer_endpoint()
        state = self._state()
        assert state.weights is not None  # both endpoints have samples after their phase
        return informative_probe(state.posterior, self._testable, state.commits, state.y, state.weights)

    def result(self) -> BisectResult:
        """The most probable culprit so far, with the change between the two levels."""
        grouped = self._grouped()
        culprit = self._answer()
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
            confirmation=self._confirmation(),
        )

    def _answer(self) -> int:
        """The culprit an A/B confirmed, else the most probable group's head."""
        if self._abs and self._abs[-1].result().decision is Decision.CONFIRMED:
            return self._abs[-1].culprit
        return int(np.argmax(self._grouped()))

    def _levels(self, culprit: int) -> model.Levels | None:
        """The two levels with the posterior's samples split at `culprit`; None before
        both endpoints have samples."""
        state = self._state()
        if state.weights is None:
            return None
        return model.levels_at(culprit, state.commits, state.y, state.weights)

    def _change(self, culprit: int) -> tuple[float, tuple[float, float]]:
        """Bad vs good level with a 95% t interval, the posterior's samples split at `culprit`."""
        levels = self._levels(culprit)
        if levels is None:
            nan = float("nan")
            return nan, (nan, nan)
        step = levels.bad - levels.good
        half = float(stdtrit(levels.dof, 0.975)) * levels.step_stderr  # scipy.stats.t.ppf(0.975, dof)
        return model.percent(step), (model.percent(step - half), model.percent(step + half))
