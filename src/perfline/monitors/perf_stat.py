"""System-wide `perf stat` counts over the interval.

cycles and instructions (and their ratio, IPC) where the CPU exposes them; many VMs
do not, and then the software events, which every kernel with perf events has.
"""

from __future__ import annotations

import csv
import functools
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from perfline.metric import Direction, Measurement, Metric
from perfline.monitors.base import Monitor, MonitorUnavailable
from perfline.process import CommandFailed, ToolMissing, require_tool, run, tail

PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
PROC_SELF_STATUS = Path("/proc/self/status")
CAP_SYS_ADMIN = 21
CAP_PERFMON = 38
# perf answers each control command on the ack descriptor; it starts in well under this.
HANDSHAKE_TIMEOUT_S = 10.0
RATE = "/s"


@dataclass(frozen=True)
class Counted:
    """A perf event and the metric it becomes: per second if the unit is /s, else as counted."""

    event: str
    metric: Metric

    def value(self, count: float, seconds: float) -> float:
        return count / seconds if self.metric.unit == RATE else count


def _counted(event: str, unit: str, description: str) -> Counted:
    name = f"perf-stat.{event.replace('-', '_')}"
    return Counted(event, Metric(name, unit, Direction.NEUTRAL, description))


HARDWARE = (
    _counted("cycles", RATE, "CPU cycles, all CPUs"),
    _counted("instructions", RATE, "instructions retired, all CPUs"),
)
IPC = Metric("perf-stat.ipc", "instructions/cycle", Direction.NEUTRAL, "instructions per cycle")
SOFTWARE = (
    # System-wide, idle time counts too: this is about the CPU count times the interval.
    _counted("task-clock", "msec", "CPU clock time counted on all CPUs"),
    _counted("context-switches", RATE, "context switches"),
    _counted("cpu-migrations", RATE, "tasks moved between CPUs"),
    _counted("page-faults", RATE, "page faults"),
)


def parse_perf_csv(text: str) -> dict[str, float]:
    """Counts by event from `perf stat -x,` output; events perf could not count are left out."""
    counts: dict[str, float] = {}
    for row in csv.reader(line for line in text.splitlines() if not line.startswith("#")):
        if len(row) < 3:
            continue
        value, _unit, event = row[:3]
        try:
            counts[event] = float(value)
        except ValueError:  # <not supported>, <not counted>
            continue
    return counts


def effective_capabilities(status: str) -> int:
    """The CapEff mask from the text of /proc/<pid>/status."""
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def system_wide_allowed(paranoid: int, capabilities: int) -> bool:
    """The kernel's rule for CPU-wide events (perf_allow_cpu)."""
    return paranoid <= 0 or bool(capabilities & (1 << CAP_PERFMON | 1 << CAP_SYS_ADMIN))


@functools.cache
def hardware_counters(perf: str) -> bool:
    """Whether this CPU counts cycles and instructions; probed once per process."""
    probe = run(
        [perf, "stat", "-x,", "-e", ",".join(c.event for c in HARDWARE), "true"], timeout=30
    )
    return "<not supported>" not in probe.stderr and "<not counted>" not in probe.stderr


class _Session:
    """One background `perf stat -a`, started with its events disabled.

    Counting is switched on and off through perf's control descriptors, and each
    switch waits for perf's acknowledgement, so the counts cover exactly the time
    between start and stop and not perf's own start-up or shut-down.
    """

    def __init__(self, perf: str, counted: tuple[Counted, ...]) -> None:
        self.counted = counted
        self._dir = tempfile.TemporaryDirectory(prefix="perfline-perf-stat-")
        self.output = Path(self._dir.name) / "stat.csv"
        self.errors = Path(self._dir.name) / "stderr"
        ctl_read, self._ctl = os.pipe()
        self._ack, ack_write = os.pipe()
        self.argv = [
            perf, "stat", "-a", "-x,", "-D", "-1", "--control", f"fd:{ctl_read},{ack_write}",
            "-e", ",".join(c.event for c in counted), "-o", str(self.output),
        ]  # fmt: skip
        with self.errors.open("w") as errors:
            self.proc = subprocess.Popen(
                self.argv, pass_fds=(ctl_read, ack_write), stdout=errors, stderr=errors
            )
        os.close(ctl_read)
        os.close(ack_write)

    def command(self, word: str) -> float:
        """Send a control command, wait for the ack; returns when it was acknowledged."""
        os.write(self._ctl, f"{word}\n".encode())
        reply = b""
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
        while b"ack" not in reply:
            ready, _, _ = select.select([self._ack], [], [], deadline - time.monotonic())
            chunk = os.read(self._ack, 64) if ready else b""
            if not chunk:
                raise CommandFailed(self.argv, f"no answer to {word!r}", tail(self._stderr()))
            reply += chunk
        return time.monotonic()

    def finish(self) -> str:
        """Stop perf with SIGINT, as a user would, so it writes its counts; return them."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=HANDSHAKE_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise CommandFailed(self.argv, "did not exit on SIGINT", tail(self._stderr())) from exc
        return self.output.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self._ctl)
        os.close(self._ack)
        self._dir.cleanup()

    def _stderr(self) -> str:
        return self.errors.read_text(errors="replace")


class PerfStat(Monitor):
    name = "perf-stat"
    summary = "perf stat -a: cycles, instructions, IPC; or software events where those are absent"
    metrics = (*(c.metric for c in HARDWARE), IPC, *(c.metric for c in SOFTWARE))
    packages = ("linux-perf",)

    def __init__(self) -> None:
        self._session: _Session | None = None
        self._started = 0.0

    def check(self) -> None:
        perf = self._perf()
        try:
            paranoid = int(PARANOID.read_text())
        except FileNotFoundError as exc:
            raise MonitorUnavailable("perf-stat: this kernel has no perf events") from exc
        if not system_wide_allowed(paranoid, effective_capabilities(PROC_SELF_STATUS.read_text())):
            raise MonitorUnavailable(
                f"perf-stat: kernel.perf_event_paranoid is {paranoid} and this process has "
                "neither CAP_PERFMON nor CAP_SYS_ADMIN, so it may not count system-wide: "
                "run as root or `sysctl kernel.perf_event_paranoid=0`"
            )
        try:
            hardware_counters(perf)
        except CommandFailed as exc:
            raise MonitorUnavailable(f"perf-stat: {exc}\n{exc.output_tail}") from exc

    def start(self) -> None:
        perf = self._perf()
        self.close()
        counted = HARDWARE if hardware_counters(perf) else SOFTWARE
        self._session = _Session(perf, counted)
        try:
            self._started = self._session.command("enable")
        except BaseException:
            self.close()
            raise

    def stop(self) -> list[Measurement]:
        if self._session is None:
            raise RuntimeError("perf-stat: stop() without start()")
        try:
            seconds = self._session.command("disable") - self._started
            counts = parse_perf_csv(self._session.finish())
            measurements = [
                Measurement(c.metric, c.value(counts[c.event], seconds))
                for c in self._session.counted
                if c.event in counts
            ]
            return measurements + _ipc(counts)
        finally:
            self.close()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    @staticmethod
    def _perf() -> str:
        try:
            return require_tool("perf", "linux-perf")
        except ToolMissing as exc:
            raise MonitorUnavailable(f"perf-stat: {exc}") from exc


def _ipc(counts: Mapping[str, float]) -> list[Measurement]:
    cycles, instructions = counts.get("cycles"), counts.get("instructions")
    if not cycles or instructions is None:
        return []
    return [Measurement(IPC, instructions / cycles)]
