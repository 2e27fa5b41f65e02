"""What on this machine will disturb measurements, each with the command that fixes it.

`perfline doctor` prints the list; the runner checks the same list when a command starts
to run benchmarks and stores what it found with each run. Every check only reads.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfline.system.files import read_or_empty
from perfline.system.journal import leftovers, state_dir, this_boot
from perfline.system.process import CPU_HOG
from perfline.system.tracing import TRACEFS, TracingState, read_tracing

CPU = Path("/sys/devices/system/cpu")
THP_DEFRAG = Path("/sys/kernel/mm/transparent_hugepage/defrag")
# A CPU this busy with other work while nothing of perfline runs shares its time with
# the benchmark (or, as an SMT sibling, its core's execution units).
BUSY_CPU_PCT = 20.0
# One-minute load average per CPU above which the machine is doing other work.
LOAD_PER_CPU = 0.25


@dataclass(frozen=True)
class Disturbance:
    what: str  # short name: "tracing", "governor", ...
    detail: str  # what was found
    fix: str  # the command (or action) that removes it

    def line(self) -> str:
        return f"{self.what}: {self.detail} (fix: {self.fix})"


def tracing(state: TracingState, own_paths: frozenset[str] = frozenset()) -> list[Disturbance]:
    """Tracing that costs measurements; `own_paths`: tracefs files this perfline has
    journaled, whose state is its own doing."""
    root = state.tracefs or str(TRACEFS)
    found = []
    if state.tracer not in ("nop", ""):
        found.append(Disturbance("tracing", f"tracer {state.tracer} is on", f"echo nop > {root}/current_tracer"))
    events = [e for e in state.events if f"{root}/events/{e.replace(':', '/', 1)}/enable" not in own_paths]
    if events:
        shown = ", ".join(events[:5]) + (f" and {len(events) - 5} more" if len(events) > 5 else "")
        fix = (f"echo 0 > {root}/events/{events[0].replace(':', '/', 1)}/enable" if len(events) == 1
               else f"echo > {root}/set_event  (disables every event)")
        found.append(Disturbance("tracing", f"trace event(s) enabled: {shown}", fix))
    for kind, probes in (("kprobe", state.kprobes), ("uprobe", state.uprobes)):
        if probes:
            found.append(Disturbance("tracing", f"{kind}(s) defined: {', '.join(probes[:3])}",
                                     f"echo > {root}/{kind}_events  (after disabling them)"))
    for owner, count in sorted(state.perf_events.items()):
        pid = owner.rpartition("[")[2].rstrip("]")
        found.append(Disturbance("perf events", f"{owner} holds {count} perf event(s)",
                                 f"stop it when it is done (kill {pid})"))
    return found


def governors(cpu: Path = CPU) -> list[Disturbance]:
    slow = sorted(
        f"{path.parent.name}={governor}"
        for path in (cpu / "cpufreq").glob("policy*/scaling_governor")
        if (governor := read_or_empty(path)) and governor != "performance"
    )
    if not slow:
        return []
    return [Disturbance("governor", f"cpufreq governor is not performance ({', '.join(slow[:4])})",
                        f"echo performance | tee {cpu}/cpufreq/policy*/scaling_governor")]


def boost(cpu: Path = CPU) -> list[Disturbance]:
    """Turbo makes speed depend on temperature and on what the other cores do."""
    found = []
    if read_or_empty(cpu / "intel_pstate/no_turbo") == "0":
        found.append(Disturbance("turbo", "Intel turbo is enabled", f"echo 1 > {cpu}/intel_pstate/no_turbo"))
    if read_or_empty(cpu / "cpufreq/boost") == "1":
        found.append(Disturbance("turbo", "cpufreq boost is enabled", f"echo 0 > {cpu}/cpufreq/boost"))
    return found


def busy_cpus(interval_s: float = 0.3, cpu: Path = CPU, ignore: frozenset[int] = frozenset()) -> list[Disturbance]:
    """CPUs busy with other work over a short interval, naming SMT siblings, which
    share a core's execution units with whatever runs beside them."""
    before = _cpu_times()
    time.sleep(interval_s)
    after = _cpu_times()
    found = []
    for n, (busy, total) in after.items():
        if n in ignore or n not in before or total == before[n][1]:
            continue
        pct = 100.0 * (busy - before[n][0]) / (total - before[n][1])
        if pct < BUSY_CPU_PCT:
            continue
        siblings = read_or_empty(cpu / f"cpu{n}/topology/thread_siblings_list")
        smt = f" (SMT siblings {siblings})" if siblings and siblings != str(n) else ""
        found.append(Disturbance("busy CPU", f"CPU {n} was {pct:.0f}% busy with other work{smt}",
                                 "find it with `top -1` and stop it, or pin the benchmark elsewhere (pin: CPUs)"))
    return found


def wait_for_quiet(max_s: float = 5.0, busy_pct: float = 25.0, window_s: float = 0.2) -> float:
    """Wait until the machine's CPUs, together, were at most `busy_pct` busy over one
    `window_s`, or `max_s` passed; the seconds waited. After a build, its last
    processes, the writeback of what it wrote and the clock it raised still run: a
    sample taken at once measures them too (one sample 7% off its level on lz4's
    history was such a one)."""
    started = time.monotonic()
    while True:
        before = _cpu_times()
        time.sleep(window_s)
        after = _cpu_times()
        busy = sum(after[n][0] - before[n][0] for n in after if n in before)
        total = sum(after[n][1] - before[n][1] for n in after if n in before)
        waited = time.monotonic() - started
        if total == 0 or 100.0 * busy / total <= busy_pct or waited >= max_s:
            return waited


def swap(meminfo: Path = Path("/proc/meminfo")) -> list[Disturbance]:
    fields = {line.split(":")[0]: line.split()[1] for line in read_or_empty(meminfo).splitlines() if ":" in line}
    used_kb = int(fields.get("SwapTotal", "0")) - int(fields.get("SwapFree", "0"))
    if used_kb <= 0:
        return []
    return [Disturbance("swap", f"{used_kb // 1024} MiB of swap in use: pages come back at fault time",
                        "swapoff -a && swapon -a  (with enough free memory)")]


def load(loadavg: Path = Path("/proc/loadavg")) -> list[Disturbance]:
    text = read_or_empty(loadavg)
    if not text:
        return []
    one = float(text.split()[0])
    cpus = os.cpu_count() or 1
    if one <= max(0.5, LOAD_PER_CPU * cpus):
        return []
    return [Disturbance("load", f"1-minute load average {one:.2f} on {cpus} CPU(s)",
                        "wait for the other work to finish (`top`), or run on a quiet machine")]


def thp_defrag(path: Path = THP_DEFRAG) -> list[Disturbance]:
    """`always` makes page faults compact memory synchronously: stalls of milliseconds."""
    text = read_or_empty(path)
    if "[always]" not in text:
        return []
    return [Disturbance("THP defrag", "transparent hugepage defrag is always (direct compaction in faults)",
                        f"echo madvise > {path}")]


def dead_journals(directory: Path, boot_id: str, alive: Callable[[int], bool]) -> list[Disturbance]:
    """Changes of a dead perfline still in place (the callback could not put them back)."""
    found = []
    for path, entries in leftovers(directory, boot_id, alive):
        shown = ", ".join(e.path for e in entries[:3]) + (" ..." if len(entries) > 3 else "")
        found.append(Disturbance("journal", f"{path} of a dead perfline holds changes not restored: {shown}",
                                 "perfline restore  (as root)"))
    return found


def cpu_hogs() -> list[Disturbance]:
    """perfline's load hogs whose perfline is gone (they die with it unless it was
    killed between fork and their PR_SET_PDEATHSIG)."""
    hog = "\0".join(CPU_HOG) + "\0"
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "cmdline").read_text() == hog:
                found.append(proc.name)
        except OSError:
            continue
    if not found:
        return []
    return [Disturbance("CPU hogs", f"{len(found)} perfline load hog(s) left running: pid {', '.join(found)}",
                        f"kill {' '.join(found)}")]


def find(alive: Callable[[int], bool], own_paths: frozenset[str] = frozenset(),
         busy_interval_s: float = 0.3) -> list[Disturbance]:
    """Every check, in the order a reader fixes them."""
    return [
        *dead_journals(state_dir(), this_boot(), alive),
        *tracing(read_tracing(), own_paths),
        *cpu_hogs(),
        *busy_cpus(busy_interval_s),
        *load(),
        *swap(),
        *governors(),
        *boost(),
        *thp_defrag(),
    ]


def _cpu_times() -> dict[int, tuple[int, int]]:
    """Per CPU: (busy jiffies, total jiffies) from /proc/stat."""
    times = {}
    for line in read_or_empty(Path("/proc/stat")).splitlines():
        name, *values = line.split()
        if not name.startswith("cpu") or name == "cpu":
            continue
        numbers = [int(v) for v in values[:8]]
        # user nice system idle iowait irq softirq steal: busy is this guest's own work;
        # steal (the host running others) is the pace guard's business, not a process here.
        idle = numbers[3] + numbers[4]
        times[int(name[3:])] = (sum(numbers[:7]) - idle, sum(numbers))
    return times
