"""Where the CPU time went: the record a profiling monitor, the store and a diff share."""

from __future__ import annotations

from dataclasses import dataclass


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
