"""The symbols whose share of CPU time moved most between two profiles.

A regression found by a benchmark number is explained by where the time went instead:
the kernel function that now takes 6 points more of the samples.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from perfline.records.profile import ProfileEntry


@dataclass(frozen=True)
class SymbolShift:
    """One symbol's share on both sides; `delta_pct` is in percentage points, other − base."""

    symbol: str
    dso: str
    kernel: bool
    base_pct: float
    other_pct: float
    delta_pct: float
    # 95% interval of delta_pct from the repetitions' own profiles, when there are some.
    ci_pct: tuple[float, float] | None = None


def profile_diff(
    base: list[ProfileEntry], other: list[ProfileEntry], top: int = 10
) -> list[SymbolShift]:
    """The `top` largest shifts by absolute change, largest first.

    A symbol missing on one side counts as 0 there. Stored profiles keep only each
    repetition's top symbols, so a small shift of a symbol near that cut-off may be one
    of truncation rather than of the kernel.
    """
    base_shares, other_shares = _shares(base), _shares(other)
    shifts = []
    for key in base_shares.keys() | other_shares.keys():
        before, after = base_shares.get(key, 0.0), other_shares.get(key, 0.0)
        shifts.append(SymbolShift(*key, base_pct=before, other_pct=after, delta_pct=after - before))
    shifts.sort(key=lambda s: (-abs(s.delta_pct), s.symbol, s.dso))
    return shifts[:top]


def _shares(entries: list[ProfileEntry]) -> dict[tuple[str, str, bool], float]:
    # The same name in two binaries (memcpy in libc and in the kernel) is two symbols.
    return {(e.symbol, e.dso, e.kernel): e.share_pct for e in entries}


Shares = dict[tuple[str, str, bool], float]


def with_intervals(shifts: list[SymbolShift], base: list[Shares], other: list[Shares],
                   confidence: float = 0.95) -> list[SymbolShift]:
    """Each shift with a Welch t interval from the per-repetition shares (a symbol not
    among a repetition's top counts 0 there); unchanged where a side has under 2."""
    from scipy import stats

    if len(base) < 2 or len(other) < 2:
        return shifts
    out = []
    for shift in shifts:
        key = (shift.symbol, shift.dso, shift.kernel)
        a = [rep.get(key, 0.0) for rep in base]
        b = [rep.get(key, 0.0) for rep in other]
        va, vb = stats.tvar(a) / len(a) if len(set(a)) > 1 else 0.0, stats.tvar(b) / len(b) if len(set(b)) > 1 else 0.0
        se = (va + vb) ** 0.5
        if se == 0:
            out.append(replace(shift, ci_pct=(shift.delta_pct, shift.delta_pct)))
            continue
        df = (va + vb) ** 2 / sum(v**2 / (n - 1) for v, n in ((va, len(a)), (vb, len(b))) if v > 0)
        margin = float(stats.t.ppf((1 + confidence) / 2, df)) * se
        delta = sum(b) / len(b) - sum(a) / len(a)
        out.append(replace(shift, ci_pct=(delta - margin, delta + margin)))
    return out
