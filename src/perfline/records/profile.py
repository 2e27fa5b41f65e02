"""Where the CPU time went: the record a profiling monitor, the store and a diff share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# Folded stacks (flame graph tools' text form): callers first, frames joined by `;`.
FOLD = ";"


class Symbol(NamedTuple):
    """A function as profiles count it: the same name in two binaries (memcpy in libc
    and in the kernel) is two symbols."""

    symbol: str
    dso: str
    kernel: bool


class Chain(NamedTuple):
    """A call chain: `frames` from the sampled function (the leaf) out to its callers,
    and the leaf's binary."""

    frames: tuple[str, ...]
    dso: str

    @property
    def folded(self) -> str:
        """The chain as one folded stack, outermost caller first."""
        return FOLD.join(reversed(self.frames))

    @classmethod
    def unfolded(cls, folded: str, dso: str) -> Chain:
        return cls(tuple(reversed(folded.split(FOLD))), dso)


@dataclass(frozen=True)
class ProfileEntry:
    """One symbol's share of the samples taken while the CPUs were busy.

    `dso` is the binary's short name (`[kernel.kallsyms]`, `libc.so.6`): a symbol is only
    the same symbol across runs in the same binary. `symbol` is `[unknown]` for samples
    perf could not resolve, which it would otherwise list address by address.
    """

    symbol: str
    dso: str
    kernel: bool
    share_pct: float

    @property
    def key(self) -> Symbol:
        return Symbol(self.symbol, self.dso, self.kernel)


@dataclass(frozen=True)
class ChainEntry:
    """One call chain's share of the samples taken while the CPUs were busy: the samples
    whose stack ends in these frames (the leaf and its nearest callers, to a depth the
    monitor chose). An unresolved frame is `[unknown]`, one for a run of them. No frame
    holds FOLD, so a chain is stored as one folded stack."""

    frames: tuple[str, ...]
    dso: str
    share_pct: float

    @property
    def key(self) -> Chain:
        return Chain(self.frames, self.dso)


@dataclass(frozen=True)
class Profile:
    """One interval's profile: its top symbols by self share and its top call chains,
    each largest share first."""

    symbols: tuple[ProfileEntry, ...]
    chains: tuple[ChainEntry, ...] = ()
