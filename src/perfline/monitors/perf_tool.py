"""What the perf monitors share: finding perf, the kernel's rule for watching every CPU,
and a background perf whose events are switched on and off precisely."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from perfline.monitors.base import MonitorUnavailable
from perfline.system.process import CommandFailed, ToolMissing, die_with_perfline, require_tool, tail

PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
PROC_SELF_STATUS = Path("/proc/self/status")
CAP_SYS_ADMIN = 21
CAP_PERFMON = 38
# perf answers each control command on the ack descriptor; it starts in well under this.
HANDSHAKE_TIMEOUT_S = 10.0


def effective_capabilities(status: str) -> int:
    """The CapEff mask from the text of /proc/<pid>/status."""
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def system_wide_allowed(paranoid: int, capabilities: int) -> bool:
    """The kernel's rule for CPU-wide events (perf_allow_cpu)."""
    return paranoid <= 0 or bool(capabilities & (1 << CAP_PERFMON | 1 << CAP_SYS_ADMIN))


def find_perf(monitor: str) -> str:
    try:
        return require_tool("perf", "linux-perf")
    except ToolMissing as exc:
        raise MonitorUnavailable(f"{monitor}: {exc}") from exc


def system_wide_perf(monitor: str) -> str:
    """The perf executable, once it is clear this process may watch every CPU."""
    perf = find_perf(monitor)
    try:
        paranoid = int(PARANOID.read_text())
    except FileNotFoundError as exc:
        raise MonitorUnavailable(f"{monitor}: this kernel has no perf events") from exc
    if not system_wide_allowed(paranoid, effective_capabilities(PROC_SELF_STATUS.read_text())):
        raise MonitorUnavailable(
            f"{monitor}: kernel.perf_event_paranoid is {paranoid} and this process has "
            "neither CAP_PERFMON nor CAP_SYS_ADMIN, so it may not watch all CPUs: "
            "run as root or `sysctl kernel.perf_event_paranoid=0`"
        )
    return perf


class PerfSession:
    """One background `perf SUBCOMMAND -a`, started with its events disabled.

    Events are switched on and off through perf's control descriptors, and each
    switch waits for perf's acknowledgement, so what perf writes to `output` covers
    exactly the time between the two and not perf's own start-up or shut-down.
    """

    def __init__(self, perf: str, subcommand: str, options: Sequence[str]) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix=f"perfline-perf-{subcommand}-")
        self.output = Path(self._dir.name) / "output"
        self.errors = Path(self._dir.name) / "stderr"
        ctl_read, self._ctl = os.pipe()
        self._ack, ack_write = os.pipe()
        self.argv = [
            perf, subcommand, "-a", "-D", "-1", "--control", f"fd:{ctl_read},{ack_write}",
            "-o", str(self.output), *options,
        ]  # fmt: skip
        with self.errors.open("w") as errors:
            # `perf -a` left running by a SIGKILLed perfline would count the whole
            # machine, and disturb every later run, until someone noticed it.
            self.proc = subprocess.Popen(
                self.argv, pass_fds=(ctl_read, ack_write), stdout=errors, stderr=errors,
                preexec_fn=die_with_perfline(),
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

    def finish(self) -> None:
        """Stop perf with SIGINT, as a user would, so that it writes `output` completely."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=HANDSHAKE_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise CommandFailed(self.argv, "did not exit on SIGINT", tail(self._stderr())) from exc

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self._ctl)
        os.close(self._ack)
        self._dir.cleanup()

    def _stderr(self) -> str:
        return self.errors.read_text(errors="replace")
