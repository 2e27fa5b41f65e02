"""Counting instead of timing: a command run under a counter, and its count read back.

Three counters, chosen by what the machine has and what was asked:

- `perf`: `perf stat -e instructions:u`, the CPU's own counter of retired user-space
  instructions, where the CPU exposes counters (most bare-metal machines, few VMs);
- `cachegrind`: `valgrind --tool=cachegrind --cache-sim=no`, Valgrind's count of the
  instructions it executes (`Ir`), where it does not; with `--cache-sim=yes` also the
  simulated cache's hits and misses, from which cycles are estimated;
- `callgrind`: `valgrind --tool=callgrind --instr-atstart=no`: counts only between the
  program's CALLGRIND_START_INSTRUMENTATION and CALLGRIND_STOP_INSTRUMENTATION (the
  macros of <valgrind/callgrind.h>), so set-up and tear-down stay out.

Every process the command starts is followed and its counts summed; the counter's name
is part of the metric's (`command.instructions.cachegrind`), so counts of different
counters are never compared with each other. docs/counting.md says what counts can and
cannot see.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from perfline.system.process import ToolMissing, require_tool

PERF, CACHEGRIND, CALLGRIND = "perf", "cachegrind", "callgrind"
INSTRUCTIONS, CYCLES_ESTIMATE = "instructions", "cycles-estimate"
COUNTS = (INSTRUCTIONS, CYCLES_ESTIMATE)
# The cycles estimate of iai-callgrind and CodSpeed from Valgrind's simulated caches: an
# L1 hit costs 1 cycle, an L1 miss that hits the last level 5, a last-level miss 35.
L1_HIT_CYCLES, LL_HIT_CYCLES, RAM_CYCLES = 1, 5, 35


@dataclass(frozen=True)
class Counter:
    """How one repetition is counted: the tool and whether it simulates caches."""

    tool: str  # PERF, CACHEGRIND or CALLGRIND
    cache_sim: bool = False

    def argv(self, command: list[str], out: Path) -> list[str]:
        """`command` under the counter, writing its counts into the directory `out`."""
        if self.tool == PERF:
            return [require_tool("perf", "linux-perf"), "stat", "-x", ",", "-e", "instructions:u", "-o",
                    str(out / "perf.csv"), "--", *command]
        sim = "--cache-sim=yes" if self.cache_sim else "--cache-sim=no"
        valgrind = require_tool("valgrind", "valgrind")
        if self.tool == CACHEGRIND:
            return [valgrind, "--tool=cachegrind", sim, "--trace-children=yes", "-q",
                    f"--cachegrind-out-file={out}/count.%p", *command]
        return [valgrind, "--tool=callgrind", "--instr-atstart=no", sim, "--trace-children=yes", "-q",
                f"--callgrind-out-file={out}/count.%p", *command]

    def read(self, out: Path) -> dict[str, float]:
        """The counts of every process, summed: {"instructions": n} and, with the cache
        simulated, {"cycles_estimate": n}. ValueError when the counter wrote none."""
        if self.tool == PERF:
            return {"instructions": perf_instructions((out / "perf.csv").read_text())}
        events: dict[str, float] = {}
        files = sorted(out.glob("count.*"))
        if not files:
            raise ValueError(f"{self.tool} wrote no counts into {out}")
        for path in files:
            for name, value in valgrind_totals(path.read_text()).items():
                events[name] = events.get(name, 0.0) + value
        counts = {"instructions": events["Ir"]}
        if self.cache_sim:
            counts["cycles_estimate"] = cycles_estimate(events)
        return counts

    def describe(self, cpu: str) -> str:
        if self.tool == PERF:
            return f"instructions:u counted by perf stat on {cpu}"
        what = "between the program's CALLGRIND markers" if self.tool == CALLGRIND else "of every process"
        return f"instructions {what}, counted by Valgrind's {self.tool}" + (
            " with its cache simulation" if self.cache_sim else "")


def choose(count: str, marker: bool) -> Counter:
    """The counter for `count` here: perf where the CPU counts instructions and no marker
    or cache simulation is asked for, else Valgrind. ToolMissing when neither counts."""
    if count == INSTRUCTIONS and not marker and perf_counts_instructions():
        return Counter(PERF)
    if shutil.which("valgrind") is None:
        reason = "this CPU exposes no instruction counter to perf, and " if count == INSTRUCTIONS else ""
        raise ToolMissing(f"count: {count}: {reason}valgrind is not installed (apt-get install valgrind)")
    return Counter(CALLGRIND if marker else CACHEGRIND, cache_sim=count == CYCLES_ESTIMATE)


def perf_counts_instructions() -> bool:
    """Whether `perf stat -e instructions:u` counts here: a VM without a virtual PMU (and a
    perf_event_paranoid that forbids it) says `<not supported>`."""
    perf = shutil.which("perf")
    if perf is None:
        return False
    try:
        proc = subprocess.run([perf, "stat", "-x", ",", "-e", "instructions:u", "--", "true"],
                              capture_output=True, text=True, timeout=30, check=False)
        return proc.returncode == 0 and perf_instructions(proc.stderr) > 0
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return False


def perf_instructions(csv: str) -> float:
    """The count of `perf stat -x ,`'s instructions line; ValueError when not counted."""
    for line in csv.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("instructions"):
            return float(fields[0])  # `<not supported>` and `<not counted>` raise here
    raise ValueError("perf stat printed no instructions count")


def valgrind_totals(text: str) -> dict[str, float]:
    """Event → total of one cachegrind or callgrind output file: its `events:` line names
    the columns of `totals:` (callgrind) or `summary:` (cachegrind)."""
    names = re.search(r"^events:\s*(.+)$", text, re.MULTILINE)
    totals = re.search(r"^totals:\s*(.+)$", text, re.MULTILINE) or re.search(r"^summary:\s*(.+)$", text, re.MULTILINE)
    if names is None or totals is None:
        raise ValueError("not a cachegrind or callgrind output file (no events: or summary: line)")
    values = [float(v) for v in totals.group(1).split()]
    # A trailing event with no count is 0 (callgrind drops trailing zeros).
    return {name: values[i] if i < len(values) else 0.0 for i, name in enumerate(names.group(1).split())}


def cycles_estimate(events: dict[str, float]) -> float:
    """L1 hits + 5 × last-level hits + 35 × last-level misses, from cachegrind's Ir, Dr,
    Dw (accesses), I1mr, D1mr, D1mw (L1 misses) and ILmr, DLmr, DLmw (LL misses)."""
    accesses = events["Ir"] + events["Dr"] + events["Dw"]
    l1_misses = events["I1mr"] + events["D1mr"] + events["D1mw"]
    ll_misses = events["ILmr"] + events["DLmr"] + events["DLmw"]
    return (L1_HIT_CYCLES * (accesses - l1_misses) + LL_HIT_CYCLES * (l1_misses - ll_misses)
            + RAM_CYCLES * ll_misses)
