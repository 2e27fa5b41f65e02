"""tracefs for the ftrace benchmarks: finding or mounting it, explaining refusals, and the
seed's write loop with everything it changes put back.

Both ftrace-switch and ftrace-events follow the seed's test-ftrace script: write each value
of a cycle to one control file, then tracing_on 1 and 0. Switching a tracer or enabling an
event waits for RCU grace periods, so the loop's wall time follows RCU latency more than
CPU speed. The loop is that script, run by a shell on this host or in a VM guest alike.
"""

from __future__ import annotations

import errno
import logging
import os
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from perfline.benchmarks.base import (
    BenchmarkFailed,
    BenchmarkUnavailable,
    CommandBenchmark,
    CommandOutput,
    GuestSetup,
    ParamValue,
)
from perfline.records.metric import Measurement
from perfline.system.journal import Entry
from perfline.system.kernel_state import KernelState, KernelStateError, lockdown_mode
from perfline.system.process import CommandFailed, ToolMissing
from perfline.system.tracing import DEBUGFS_TRACING, TRACEFS

log = logging.getLogger(__name__)

SECURITYFS = Path("/sys/kernel/security")

# The seed's test-ftrace loop: `sh -c CYCLE NAME TRACEFS CONTROL ITERATIONS VALUE...`. Each
# `echo` is one open-write-close, as the script's were; a refused write stops the loop
# with the shell's message (set -e). On this host both files were journaled at set-up,
# before the first write; the shell dies with perfline (tied), so the restore after a
# SIGKILL is not written over by a loop still running.
CYCLE = """set -e
cd "$1"
control=$2
count=$3
shift 3
i=0
while [ "$i" -lt "$count" ]; do
    for value in "$@"; do
        echo "$value" > "$control"
        echo 1 > tracing_on
        echo 0 > tracing_on
    done
    i=$((i + 1))
done
"""
# In a guest (`sh -c GUEST_TRACEFS NAME LISTING`): tracefs mounted where the kernel offers
# it, then `TRACEFS [mounted]` and the listing file the parameters are checked against.
# The VM is thrown away after the run, so nothing is put back there.
GUEST_TRACEFS = f"""set -e
t={TRACEFS}
if [ -e "$t/tracing_on" ]; then echo "$t"; else mount -t tracefs tracefs "$t"; echo "$t mounted"; fi
cat "$t/$1"
"""
GUEST_SETUP_TIMEOUT_S = 60.0
# Bounds that only catch a hung kernel: a tracer switch waits a few grace periods, and
# under emulation (TCG) patching every traced function for `function` takes seconds.
TIMEOUT_PER_WRITE_S = 10.0
TIMEOUT_SLACK_S = 60.0


def read_lockdown(kernel: KernelState) -> str:
    """The kernel lockdown mode for an error message, mounting securityfs for a moment."""
    try:
        with kernel.mounted("securityfs", SECURITYFS):
            return lockdown_mode((SECURITYFS / "lockdown").read_text()) or "unknown"
    except (OSError, ToolMissing, CommandFailed) as exc:
        return f"unknown ({exc})"


def refusal(exc: OSError | KernelStateError, kernel: KernelState) -> str:
    """errno name of a tracefs refusal; for EPERM also the lockdown mode, the first suspect."""
    reason = errno.errorcode.get(exc.errno or 0, str(exc))
    return f"{reason}; kernel lockdown: {read_lockdown(kernel)}" if exc.errno == errno.EPERM else reason


class TracefsCycle(CommandBenchmark):
    """The seed's loop over one control file; subclasses choose the file and its values.

    `iterations` times: for each value of the cycle, write it to the control file, then
    tracing_on 1 and 0 (CYCLE, one repetition's command). On this host every change goes
    through `self.kernel`: tracefs mounted and the old values of the control file and
    tracing_on journaled before the first write, restored at teardown or, after a crash,
    by the next perfline command. In a VM guest, tracefs is mounted by the guest set-up.
    """

    # The tracefs file listing what the kernel offers, which `prepare` checks against.
    listing: ClassVar[str]
    # CYCLE changes kernel state journaled by this process: it must not outlive it.
    tied = True

    def __init__(self, params: Mapping[str, ParamValue], workdir: Path) -> None:
        super().__init__(params, workdir)
        # What teardown undoes, newest first: the tracefs files, then the mount.
        self._changes: list[Entry] = []
        self.tracefs = TRACEFS
        self._mounted_tracefs = False
        self._control = ""
        self._cycle: list[str] = []

    @abstractmethod
    def prepare(self, listing: str) -> tuple[str, list[str]]:
        """The control file (relative to tracefs) and its cycle of values, given the
        content of the `listing` file.

        Raise BenchmarkUnavailable when the parameters do not fit this kernel.
        """

    @abstractmethod
    def refused(self, value: str, exc: OSError | KernelStateError) -> str:
        """The message when the kernel refuses writing `value` to the control file."""

    def setup(self) -> None:
        if os.geteuid() != 0:
            raise BenchmarkUnavailable(f"{self.name} writes to tracefs and must run as root")
        self.tracefs = self._find_tracefs()
        self._control, self._cycle = self.prepare(self.read(self.listing))
        try:
            self._changes += self.kernel.hold(
                [(self.tracefs / self._control, self._cycle[0]), (self.tracefs / "tracing_on", "1")]
            )
        except KernelStateError as exc:
            raise BenchmarkUnavailable(f"cannot read {exc.path} ({exc.reason})") from exc
        # Each value once, so that a kernel refusal is reported before any repetition.
        for value in dict.fromkeys(self._cycle):
            try:
                self.kernel.write(self.tracefs / self._control, value)
            except KernelStateError as exc:
                raise BenchmarkUnavailable(self.refused(value, exc)) from exc

    def guest_setup(self) -> GuestSetup:
        return GuestSetup(["/bin/sh", "-c", GUEST_TRACEFS, self.name, self.listing], GUEST_SETUP_TIMEOUT_S)

    def guest_ready(self, output: CommandOutput) -> None:
        where, _, listing = output.stdout.partition("\n")
        path, _, mounted = where.partition(" ")
        self.tracefs, self._mounted_tracefs = Path(path), mounted == "mounted"
        self._control, self._cycle = self.prepare(listing)

    def argv(self) -> list[str]:
        iterations = str(self.values["iterations"])
        return ["/bin/sh", "-c", CYCLE, self.name, str(self.tracefs), self._control, iterations, *self._cycle]

    def executables(self) -> list[Path]:
        """None: the guest's own shell runs the loop (argv is known only after set-up)."""
        return []

    def timeout(self) -> float:
        writes = int(self.values["iterations"]) * len(self._cycle) * 3
        return TIMEOUT_SLACK_S + TIMEOUT_PER_WRITE_S * writes

    def parse(self, output: CommandOutput) -> list[Measurement]:
        (seconds,) = self.metrics
        return [Measurement(seconds, output.elapsed_s)]

    def failure(self, message: str, output_tail: str) -> BenchmarkFailed:
        return BenchmarkFailed(f"{self.name}: writing to tracefs failed: {message}", output_tail)

    def read(self, name: str) -> str:
        """A tracefs file's content; BenchmarkUnavailable saying why when it cannot be read."""
        try:
            return (self.tracefs / name).read_text().strip()
        except OSError as exc:
            raise BenchmarkUnavailable(f"cannot read {exc.filename} ({refusal(exc, self.kernel)})") from exc

    def _find_tracefs(self) -> Path:
        if (TRACEFS / "tracing_on").exists():
            return TRACEFS
        if TRACEFS.is_dir():
            try:
                mount = self.kernel.mount("tracefs", TRACEFS)
            except ToolMissing as exc:
                raise BenchmarkUnavailable(str(exc)) from exc
            except CommandFailed as exc:
                raise BenchmarkUnavailable(
                    f"cannot mount tracefs on {TRACEFS}: {exc.output_tail}"
                ) from exc
            if mount is not None:
                self._changes.append(mount)
                self._mounted_tracefs = True
            return TRACEFS
        if (DEBUGFS_TRACING / "tracing_on").exists():
            return DEBUGFS_TRACING
        raise BenchmarkUnavailable(
            f"no tracefs at {TRACEFS} or {DEBUGFS_TRACING}: kernel built without CONFIG_FTRACE?"
        )

    def teardown(self) -> None:
        changes, self._changes = self._changes, []
        for failed in self.kernel.restore(changes):
            # Kept in the journal: the next perfline command tries again.
            log.error("%s could not restore %s to %r", self.name, failed.path, failed.old or "unmounted")

    def settings(self) -> dict[str, Any]:
        return {"tracefs": str(self.tracefs), "tracefs_mounted_by_perfline": self._mounted_tracefs}

    def guest_settings(self) -> dict[str, Any]:
        return self.settings()
