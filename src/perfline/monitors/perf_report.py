"""What both perf-profile monitors share, on this host and inside a VM: perf's record and
report options, and the report parsed into symbols, call chains and the kernel's share.

cpu-clock is a timer, not a hardware counter, so this works in VMs that have none. The
profile keeps the top symbols, kernel and user, by their share of the samples taken
while a CPU was busy: self time, each sample counted once for the function it was in.
Beside them it keeps the top call chains: the function a sample was in and its nearest
callers, so a shift can say which path into a function grew.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from perfline.records.metric import Direction, Measurement, Metric
from perfline.records.profile import FOLD, Chain, ChainEntry, Profile, ProfileEntry

# Not 1000: a rate in lockstep with the kernel's tick would keep sampling the same
# moment of every tick.
FREQUENCY_HZ = 999
TOP = 30
# Frames kept of a chain, the sampled function first: enough to see the syscall or the
# user function that led into a kernel function, few enough that chains which differ
# only far out (in main, in the process's start) count as one.
CHAIN_DEPTH = 8
# The idle task. cpu-clock samples an idle CPU sometimes and sometimes not at all (seen
# on this VM from one run to the next), so idle would swing every other share with it.
IDLE_PID = 0
UNKNOWN = "[unknown]"
# Addresses perf could not name, e.g. in stripped binaries; one entry per address would
# push real symbols out of the top and differ between builds for no reason. In a chain
# perf writes a frame at address 0 as a bare `0`: where a walk through code without
# frame pointers (libc's syscall wrappers) ends.
ADDRESS = re.compile(r"0x[0-9a-f]+|0")
# Code a JIT wrote (qemu's TCG, a JVM) is named after the thread that wrote it, which
# differs from run to run: one name for all of it keeps it one item across runs.
JIT_DSO = re.compile(r"\[JIT\] tid \d+")
JIT = "[JIT]"
REPORT_TIMEOUT_S = 600.0

RECORD_OPTIONS = (
    "-e", "cpu-clock",
    # Call graphs (frame pointers: kernel stacks are complete, user ones as deep as the
    # binaries keep frame pointers), for the top chains beside the self shares; they cost
    # ~40% more perf.data (0.7 MB for 2.4 s on 2 busy CPUs here).
    "-g",
    # Build ids let perf.data be read on another machine; it is read here at once, and
    # collecting them cost about 0.1 s at every stop.
    "-B",
    # perf 6.1 waits for its BPF side-band thread on exit, which added 0.3-0.45 s to every
    # stop here; the price is that samples in JITed BPF programs count as [unknown].
    "--no-bpf-event",
)  # fmt: skip
REPORT_OPTIONS = (
    "--stdio", "-n", "--sort", "pid,sym,dso", "-t", "\t",
    # Self time, one row per symbol: with call graphs recorded, perf report would add
    # each symbol's callees to it (--children). Under each row, its samples' chains
    # folded (callers first, one line per distinct chain with its count), read in the
    # same pass: +20-80 ms a stop over `-g none` (2.4 s on 2 busy CPUs: 254 -> 273, 339
    # -> 374, 367 -> 451 ms, perf and parsing, medians of 9 at load average 5; 10 s:
    # 769 -> 799 ms; bench/perf_profile_stop.py). `perf script` would be a second pass
    # over perf.data, 260-430 ms before parsing its ~9x as many lines (98,000 against
    # 11,000 for 18,000 samples).
    "--no-children", "-g", "folded,0,caller,count",
    # Shares are counted from the rows, so a perfconfig hiding small ones must not apply.
    "--percent-limit", "0",
)  # fmt: skip

SAMPLES = Metric(
    "perf-profile.samples",
    "samples",
    Direction.NEUTRAL,
    "cpu-clock samples on busy CPUs (idle and perf itself left out); ~1 per busy CPU-ms",
)
KERNEL_PCT = Metric(
    "perf-profile.kernel_pct", "%", Direction.NEUTRAL, "share of busy-CPU samples in the kernel"
)


@dataclass(frozen=True)
class Stack:
    """One distinct call chain under a report row: its samples, and its frames as perf
    named them, the sampled function first."""

    samples: int
    frames: tuple[str, ...]


@dataclass(frozen=True)
class ReportRow:
    pid: int
    samples: int
    symbol: str
    dso: str
    kernel: bool
    stacks: tuple[Stack, ...] = ()


@dataclass(frozen=True)
class Tally:
    samples: int
    kernel_samples: int
    profile: Profile


def parse_report(text: str) -> list[ReportRow]:
    """Rows of `perf report -n --sort pid,sym,dso -t '<tab>'`, each with the folded
    chains perf prints under it (`-g folded,0,caller,count`: `COUNT caller<tab>...<tab>leaf`).

    With a separator perf pads nothing that matters and replaces the separator inside
    names, so a symbol with spaces (C++) stays one field.
    """
    found: list[tuple[list[str], list[Stack]]] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if fields[0].strip().endswith("%"):
            found.append(([f.strip() for f in fields], []))
        else:
            count, _, callers_first = line.partition(" ")
            found[-1][1].append(Stack(int(count), tuple(reversed(callers_first.split("\t")))))
    rows = []
    for (_overhead, samples, pid_comm, mode_symbol, dso), stacks in found:
        mode, _, symbol = mode_symbol.partition(" ")
        rows.append(
            ReportRow(
                pid=int(pid_comm.partition(":")[0]),
                samples=int(samples),
                symbol=_named(symbol.strip()),
                dso=JIT if JIT_DSO.fullmatch(dso) else dso,
                kernel=mode == "[k]",
                stacks=tuple(stacks),
            )
        )
    return rows


def _named(symbol: str) -> str:
    return UNKNOWN if ADDRESS.fullmatch(symbol) else symbol


def chain_frames(frames: Sequence[str], depth: int) -> tuple[str, ...]:
    """The first `depth` frames, a run of unresolved ones counted as one `[unknown]`
    (below a named function, a binary without frame pointers such as libpython leaves
    addresses that differ from process to process), FOLD in a name written `:` as
    flame graph tools do."""
    chain: list[str] = []
    for frame in frames:
        name = _named(frame).replace(FOLD, ":")
        if name != UNKNOWN or not chain or chain[-1] != UNKNOWN:
            chain.append(name)
    return tuple(chain[:depth])


def summarize(rows: list[ReportRow], exclude_pids: Collection[int], top: int, depth: int = CHAIN_DEPTH) -> Tally:
    """Samples per symbol and per call chain (to `depth` frames) over all processes but
    `exclude_pids`; the `top` largest shares of each."""
    counts: Counter[tuple[str, str, bool]] = Counter()
    chains: Counter[Chain] = Counter()
    for row in rows:
        if row.pid not in exclude_pids:
            counts[row.symbol, row.dso, row.kernel] += row.samples
            for stack in row.stacks:
                chains[Chain(chain_frames(stack.frames, depth), row.dso)] += stack.samples
    total = sum(counts.values())
    symbols = tuple(
        ProfileEntry(symbol, dso, kernel, 100.0 * n / total)
        for (symbol, dso, kernel), n in counts.most_common(top)
    )
    # A chain's share is of the same busy samples as a symbol's, so the two tables read alike.
    top_chains = tuple(ChainEntry(*chain, 100.0 * n / total) for chain, n in chains.most_common(top))
    kernel_samples = sum(n for (_, _, kernel), n in counts.items() if kernel)
    return Tally(total, kernel_samples, Profile(symbols, top_chains))


def measurements(tally: Tally) -> list[Measurement]:
    """The samples counted and, when there were some, the kernel's share of them."""
    measured = [Measurement(SAMPLES, tally.samples)]
    if tally.samples:
        measured.append(Measurement(KERNEL_PCT, 100.0 * tally.kernel_samples / tally.samples))
    return measured


def kernel_addresses_visible(kallsyms: Iterable[str]) -> bool:
    """kptr_restrict shows every address as zeros to whoever may not see them. The first
    lines can be per-CPU symbols, at 0 whoever reads them (6.12 begins with
    `0000000000000000 A fixed_percpu_data`), so the first function's address tells."""
    for line in kallsyms:
        fields = line.split()
        if len(fields) >= 3 and fields[1] in ("T", "t"):
            return int(fields[0], 16) != 0
    return False
