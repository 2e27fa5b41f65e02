"""Profile shifts for readers and for programs: a call chain on one line, a shift as JSON.

`compare` and the regression report show the same shifts; this is their one wording.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perfline.stats.profile_diff import ChainShift, SymbolShift

ARROW = " <- "
ELLIPSIS = "…"
# A demangled C++ name runs to hundreds of characters; its start says which one it is.
MAX_NAME = 40
# What fits a terminal line beside the numbers; the callers nearest the leaf matter most.
MAX_CHAIN = 100


def chain_text(frames: Sequence[str], width: int = MAX_CHAIN) -> str:
    """`leaf <- caller <- caller`, long names cut, the outermost callers dropped (`<- …`)
    once the line would pass `width` characters; the leaf is always shown."""
    names = [name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + ELLIPSIS for name in frames]
    text = names[0]
    for name in names[1:]:
        if len(text) + len(ARROW) + len(name) > width:
            return text + ARROW + ELLIPSIS
        text += ARROW + name
    return text


def shift_json(shift: SymbolShift | ChainShift) -> dict[str, Any]:
    """The item's own fields (symbol, dso, kernel; or frames, leaf first, and dso), then
    the shares and the interval."""
    return {**shift.key._asdict(), "base_pct": shift.base_pct, "other_pct": shift.other_pct,
            "delta_pct": shift.delta_pct, "ci_pct": list(shift.ci_pct) if shift.ci_pct else None}
