"""tracefs for the ftrace benchmarks: finding or mounting it, explaining refusals, and the
seed's write loop with everything it changes put back.

Both ftrace-switch and ftrace-events follow the seed's test-ftrace script: write each value
of a cycle to one control file, then tracing_on 1 and 0. Switching a tracer or enabling an
event waits for RCU grace periods, so the loop's wall time follows RCU latency more than
CPU speed.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfline.benchmarks.base import (
    Benchmark,
    BenchmarkFailed,
    BenchmarkUnavailable,
    ParamValue,
)
from perfline.records.metric import Measurement
from perfline.system.journal import Entry
from perfline.system.kernel_state import KernelState, KernelStateError, lockdown_mode
from perfline.system.process import CommandFailed, ToolMissing
from perfline.system.tracing import DEBUGFS_TRACING, TRACEFS

log = logging.getLogger(__name__)

SECURITYFS = Path("/sys/kernel/security")


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


class TracefsCycle(Benchmark):
    """The seed's loop over one control file; subclasses choose the file and its values.

    `iterations` times: for each value of the cycle, write it to the control file, then
    tracing_on 1 and 0. Every change goes through `self.kernel`: tracefs mounted and
    the old values of the control file and tracing_on journaled before the first write,
    restored at teardown or, after a crash, by the next perfline command.
    """

    def __init__(self, params: Mapping[str, ParamValue], workdir: Path) -> None:
        super().__init__(params, workdir)
        # What teardown undoes, newest first: the tracefs files, then the mount.
        self._changes: list[Entry] = []
        self.tracefs = TRACEFS
        self._mounted_tracefs = False
        self._control = ""
        self._cycle: list[str] = []

    @abstractmethod
    def prepare(self) -> tuple[str, list[str]]:
        """The control file (relative to tracefs) and its cycle of values, once tracefs is found.

        Raise BenchmarkUnavailable when the parameters do not fit this kernel.
        """

    @abstractmethod
    def refused(self, value: str, exc: OSError | KernelStateError) -> str:
        """The message when the kernel refuses writing `value` to the control file."""

    def setup(self) -> None:
        if os.geteuid() != 0:
            raise BenchmarkUnavailable(f"{self.name} writes to tracefs and must run as root")
        self.tracefs = self._find_tracefs()
        self._control, self._cycle = self.prepare()
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

    def run_once(self) -> list[Measurement]:
        control = self.tracefs / self._control
        tracing_on = self.tracefs / "tracing_on"
        write = self.kernel.write  # both files were journaled at setup
        try:
            start = time.perf_counter()
            for _ in range(int(self.values["iterations"])):
                for value in self._cycle:
                    write(control, value)
                    write(tracing_on, "1")
                    write(tracing_on, "0")
            elapsed = time.perf_counter() - start
        except KernelStateError as exc:
            raise BenchmarkFailed(f"{self.name}: writing to tracefs failed: {exc}") from exc
        (seconds,) = self.metrics
        return [Measurement(seconds, elapsed)]

    def teardown(self) -> None:
        changes, self._changes = self._changes, []
        for failed in self.kernel.restore(changes):
            # Kept in the journal: the next perfline command tries again.
            log.error("%s could not restore %s to %r", self.name, failed.path, failed.old or "unmounted")

    def settings(self) -> dict[str, Any]:
        return {"tracefs": str(self.tracefs), "tracefs_mounted_by_perfline": self._mounted_tracefs}
