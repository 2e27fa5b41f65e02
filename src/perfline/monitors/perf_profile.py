"""Where the CPU time went: `perf record -g` on cpu-clock across all CPUs over the interval.

cpu-clock is a timer, not a hardware counter, so this works in VMs that have none. The
profile keeps the top symbols, kernel and user, by their share of the samples taken
while a CPU was busy: self time, each sample counted once for the function it was in.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from perfline.monitors.base import MonitorUnavailable, ProfilingMonitor
from perfline.monitors.perf_tool import PerfSession, find_perf, system_wide_perf
from perfline.records.metric import Direction, Measurement, Metric
from perfline.records.profile import ProfileEntry
from perfline.system.process import run

# Not 1000: a rate in lockstep with the kernel's tick would keep sampling the same
# moment of every tick.
FREQUENCY_HZ = 999
TOP = 30
KALLSYMS = Path("/proc/kallsyms")
KPTR_RESTRICT = Path("/proc/sys/kernel/kptr_restrict")
# The idle task. cpu-clock samples an idle CPU sometimes and sometimes not at all (seen
# on this VM from one run to the next), so idle would swing every other share with it.
IDLE_PID = 0
UNKNOWN = "[unknown]"
# Addresses perf could not name, e.g. in stripped binaries; one entry per address would
# push real symbols out of the top and differ between builds for no reason.
ADDRESS = re.compile(r"0x[0-9a-f]+")
REPORT_TIMEOUT_S = 600.0

RECORD_OPTIONS = (
    "-e", "cpu-clock",
    # Call graphs (frame pointers: kernel stacks are complete, user ones as deep as the
    # binaries keep frame pointers). The store keeps self shares only (REPORT_OPTIONS);
    # the chains cost ~40% more perf.data (0.7 MB for 2.4 s on 2 busy CPUs here) and no
    # measurable report time with `-g none` (0.22 s a stop, as without -g).
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
    # each symbol's callees to it (--children) and print the chains under every row.
    "--no-children", "-g", "none",
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
class ReportRow:
    pid: int
    samples: int
    symbol: str
    dso: str
    kernel: bool


@dataclass(frozen=True)
class Profile:
    samples: int
    kernel_samples: int
    entries: list[ProfileEntry]


def parse_report(text: str) -> list[ReportRow]:
    """Rows of `perf report -n --sort pid,sym,dso -t '<tab>'`.

    With a separator perf pads nothing that matters and replaces the separator inside
    names, so a symbol with spaces (C++) stays one field.
    """
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        _overhead, samples, pid_comm, mode_symbol, dso = (f.strip() for f in line.split("\t"))
        mode, _, symbol = mode_symbol.partition(" ")
        symbol = symbol.strip()
        rows.append(
            ReportRow(
                pid=int(pid_comm.partition(":")[0]),
                samples=int(samples),
                symbol=UNKNOWN if ADDRESS.fullmatch(symbol) else symbol,
                dso=dso,
                kernel=mode == "[k]",
            )
        )
    return rows


def summarize(rows: list[ReportRow], exclude_pids: Collection[int], top: int) -> Profile:
    """Samples per symbol over all processes but `exclude_pids`; the `top` largest shares."""
    counts: Counter[tuple[str, str, bool]] = Counter()
    for row in rows:
        if row.pid not in exclude_pids:
            counts[row.symbol, row.dso, row.kernel] += row.samples
    total = sum(counts.values())
    entries = [
        ProfileEntry(symbol, dso, kernel, 100.0 * n / total)
        for (symbol, dso, kernel), n in counts.most_common(top)
    ]
    kernel_samples = sum(n for (_, _, kernel), n in counts.items() if kernel)
    return Profile(total, kernel_samples, entries)


def kernel_addresses_visible(first_kallsyms_line: str) -> bool:
    """kptr_restrict shows addresses as zeros to whoever may not see them."""
    fields = first_kallsyms_line.split()
    return bool(fields) and int(fields[0], 16) != 0


class PerfProfile(ProfilingMonitor):
    name = "perf-profile"
    summary = "perf record -a -g on cpu-clock: top kernel and user symbols by self share, kernel share"
    metrics = (SAMPLES, KERNEL_PCT)
    packages = ("linux-perf",)

    def __init__(self, frequency_hz: int = FREQUENCY_HZ, top: int = TOP) -> None:
        self.frequency_hz = frequency_hz
        self.top = top
        self._session: PerfSession | None = None
        self._perf = ""
        self._profile: list[ProfileEntry] = []

    def check(self) -> None:
        system_wide_perf(self.name)
        try:
            with KALLSYMS.open() as kallsyms:
                visible = kernel_addresses_visible(kallsyms.readline())
        except FileNotFoundError as exc:
            raise MonitorUnavailable(
                f"{self.name}: this kernel has no /proc/kallsyms (CONFIG_KALLSYMS), "
                "so perf cannot name kernel functions"
            ) from exc
        if not visible:
            raise MonitorUnavailable(
                f"{self.name}: kernel.kptr_restrict is {KPTR_RESTRICT.read_text().strip()} "
                "and hides kernel addresses from this process, so perf cannot name kernel "
                "functions: run as root with kptr_restrict 1, or `sysctl kernel.kptr_restrict=0`"
            )

    def start(self) -> None:
        self._perf = find_perf(self.name)
        self.close()
        self._profile = []
        options = [*RECORD_OPTIONS, "-F", str(self.frequency_hz)]
        self._session = PerfSession(self._perf, "record", options)
        try:
            self._session.command("enable")
        except BaseException:
            self.close()
            raise

    def stop(self) -> list[Measurement]:
        session = self._session
        if session is None:
            raise RuntimeError(f"{self.name}: stop() without start()")
        try:
            session.command("disable")
            session.finish()
            report = run(
                [self._perf, "report", "-i", str(session.output), *REPORT_OPTIONS],
                timeout=REPORT_TIMEOUT_S,
            ).stdout
        finally:
            self.close()
        # perf's own pid: its writing of perf.data is the cost of watching, not the workload.
        profile = summarize(parse_report(report), {IDLE_PID, session.proc.pid}, self.top)
        self._profile = profile.entries
        measured = [Measurement(SAMPLES, profile.samples)]
        if profile.samples:
            kernel_pct = 100.0 * profile.kernel_samples / profile.samples
            measured.append(Measurement(KERNEL_PCT, kernel_pct))
        return measured

    def profile(self) -> list[ProfileEntry]:
        return list(self._profile)

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
