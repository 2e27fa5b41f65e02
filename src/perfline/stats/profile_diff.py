"""The symbols whose share of CPU time moved most between two profiles.

A regression found by a benchmark number is explained by where the time went instead:
the kernel function that now takes 6 points more of the samples.
"""

from __future__ import annotations

from dataclasses import dataclass

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
