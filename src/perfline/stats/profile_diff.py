"""What moved most between two profiles: symbols, or call chains, by their share of CPU time.

A regression found by a benchmark number is explained by where the time went instead:
the kernel function that now takes 6 points more of the samples, the path it is now
called through. Everything here works on shares keyed by whatever identifies an item
(records.profile's Symbol or Chain): the same arithmetic for both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from perfline.records.profile import Chain, Symbol

K = TypeVar("K", bound=Hashable)
K_co = TypeVar("K_co", covariant=True)


class Entry(Protocol[K_co]):
    """A profile's item: records.profile's ProfileEntry and ChainEntry."""

    @property
    def key(self) -> K_co: ...

    @property
    def share_pct(self) -> float: ...


@dataclass(frozen=True)
class Shift(Generic[K]):
    """One item's share on both sides; `delta_pct` is in percentage points, other − base."""

    key: K
    base_pct: float
    other_pct: float
    delta_pct: float
    # 95% interval of delta_pct from the repetitions' own profiles, when there are some.
    ci_pct: tuple[float, float] | None = None


SymbolShift = Shift[Symbol]
ChainShift = Shift[Chain]


def shares(entries: Iterable[Entry[K]]) -> dict[K, float]:
    return {e.key: e.share_pct for e in entries}


def mean_shares(profiles: Sequence[Mapping[K, float]]) -> dict[K, float]:
    """The mean share of every item over several profiles, 0 where one lacks it: stored
    profiles keep only their top items."""
    totals: dict[K, float] = defaultdict(float)
    for profile in profiles:
        for key, share in profile.items():
            totals[key] += share
    return {key: total / len(profiles) for key, total in totals.items()}


def profile_diff(base: Mapping[K, float], other: Mapping[K, float], top: int | None = 10) -> list[Shift[K]]:
    """The `top` largest shifts by absolute change (None: all), largest first.

    An item missing on one side counts as 0 there. Stored profiles keep only each
    repetition's top items, so a small shift of an item near that cut-off may be one
    of truncation rather than of the kernel.
    """
    found = []
    for key in base.keys() | other.keys():
        before, after = base.get(key, 0.0), other.get(key, 0.0)
        found.append(Shift(key, base_pct=before, other_pct=after, delta_pct=after - before))
    # Keys of one kind are tuples of one shape, so they order the ties the same way every time.
    found.sort(key=lambda s: (-abs(s.delta_pct), s.key))
    return found[:top]


def top_shares(base: Sequence[Mapping[K, float]], other: Sequence[Mapping[K, float]],
               top: int = 10) -> list[Shift[K]]:
    """The `top` items by their larger mean share on either side, largest first, each with
    both sides' shares and the interval of its shift: where the time goes, whether or not
    it moved."""
    if not base or not other:
        return []
    before, after = mean_shares(base), mean_shares(other)
    keys = sorted(before.keys() | after.keys(), key=lambda k: (-max(before.get(k, 0.0), after.get(k, 0.0)), k))
    found = [Shift(k, base_pct=before.get(k, 0.0), other_pct=after.get(k, 0.0),
                   delta_pct=after.get(k, 0.0) - before.get(k, 0.0)) for k in keys[:top]]
    return with_intervals(found, base, other)


def moved(base: Sequence[Mapping[K, float]], other: Sequence[Mapping[K, float]],
          confidence: float = 0.95) -> list[Shift[K]] | None:
    """The items whose share moved beyond noise, strongest first (by how far the interval
    stays from 0: the least the share can have moved); None when a side has under two
    profiles, so that nothing can be judged.

    Every item of either side is compared, each interval at Bonferroni's level, so the
    list is right as a whole with `confidence`: with a hundred symbols at 95% each, five
    would move by chance in a change that moves none.
    """
    if len(base) < 2 or len(other) < 2:
        return None
    compared = profile_diff(mean_shares(base), mean_shares(other), top=None)
    if not compared:
        return []
    judged = with_intervals(compared, base, other, confidence=1 - (1 - confidence) / len(compared))
    found = [s for s in judged if s.ci_pct is not None and (s.ci_pct[0] > 0 or s.ci_pct[1] < 0)]
    return sorted(found, key=lambda s: (-min(abs(s.ci_pct[0]), abs(s.ci_pct[1])) if s.ci_pct else 0.0, s.key))


def with_intervals(shifts: list[Shift[K]], base: Sequence[Mapping[K, float]],
                   other: Sequence[Mapping[K, float]], confidence: float = 0.95) -> list[Shift[K]]:
    """Each shift with a Welch t interval from the per-repetition shares (an item not
    among a repetition's top counts 0 there); unchanged where a side has under 2."""
    if len(base) < 2 or len(other) < 2:
        return shifts
    # Here, not above: the store imports this module, and its other users need neither.
    import numpy as np
    from scipy.special import stdtrit  # scipy.stats.t.ppf(q, df) is stdtrit(df, q)

    out = []
    for shift in shifts:
        a = [rep.get(shift.key, 0.0) for rep in base]
        b = [rep.get(shift.key, 0.0) for rep in other]
        va = float(np.var(a, ddof=1)) / len(a) if len(set(a)) > 1 else 0.0
        vb = float(np.var(b, ddof=1)) / len(b) if len(set(b)) > 1 else 0.0
        se = (va + vb) ** 0.5
        if se == 0:
            out.append(replace(shift, ci_pct=(shift.delta_pct, shift.delta_pct)))
            continue
        df = (va + vb) ** 2 / sum(v**2 / (n - 1) for v, n in ((va, len(a)), (vb, len(b))) if v > 0)
        margin = float(stdtrit(df, (1 + confidence) / 2)) * se
        delta = sum(b) / len(b) - sum(a) / len(a)
        out.append(replace(shift, ci_pct=(delta - margin, delta + margin)))
    return out


def shifts(base: Sequence[Mapping[K, float]], other: Sequence[Mapping[K, float]], top: int = 10) -> list[Shift[K]]:
    """The `top` largest shifts between two sides' mean profiles, each side given as its
    profiles (repetitions or runs), with intervals from them; none where a side has none."""
    if not base or not other:
        return []
    return with_intervals(profile_diff(mean_shares(base), mean_shares(other), top), base, other)
