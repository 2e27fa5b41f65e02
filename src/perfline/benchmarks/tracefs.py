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
import re
import time
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from perfline.benchmarks.base import (
    Benchmark,
    BenchmarkFailed,
    BenchmarkUnavailable,
    ParamValue,
)
from perfline.records.metric import Measurement
from perfline.system.process import CommandFailed, ToolMissing, require_tool, run

log = logging.getLogger(__name__)

TRACEFS = Path("/sys/kernel/tracing")
# Kernels before 4.1 have tracefs only inside debugfs.
DEBUGFS_TRACING = Path("/sys/kernel/debug/tracing")
SECURITYFS = Path("/sys/kernel/security")


def lockdown_mode(text: str) -> str | None:
    """The active mode of /sys/kernel/security/lockdown, e.g. 'none [integrity] confidentiality'."""
    found = re.search(r"\[(\w+)\]", text)
    return found.group(1) if found else None


def is_mounted(fstype: str, target: Path) -> bool:
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        return any(
            fields[1] == str(target) and fields[2] == fstype
            for fields in (line.split() for line in mounts)
        )


@contextmanager
def mounted(fstype: str, target: Path) -> Iterator[bool]:
    """Ensure `fstype` is mounted on `target`; yields whether we mounted it (and will unmount).

    Raises ToolMissing or CommandFailed when mounting is impossible.
    """
    if is_mounted(fstype, target):
        yield False
        return
    run([require_tool("mount", "mount"), "-t", fstype, fstype, str(target)], timeout=30)
    try:
        yield True
    finally:
        run([require_tool("umount", "mount"), str(target)], timeout=30)


def read_lockdown() -> str:
    """The kernel lockdown mode for an error message, mounting securityfs for a moment."""
    try:
        with mounted("securityfs", SECURITYFS):
            return lockdown_mode((SECURITYFS / "lockdown").read_text()) or "unknown"
    except (OSError, ToolMissing, CommandFailed) as exc:
        return f"unknown ({exc})"


def refusal(exc: OSError) -> str:
    """errno name of a tracefs refusal; for EPERM also the lockdown mode, the first suspect."""
    reason = errno.errorcode.get(exc.errno or 0, str(exc))
    return f"{reason}; kernel lockdown: {read_lockdown()}" if exc.errno == errno.EPERM else reason


def write(path: Path, value: str) -> None:
    # One open-write-close per value, as `echo value > file` does: tracefs acts on each write.
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def restorable(value: str) -> str:
    """What to write back to restore a file read as `value`.

    An event's enable file reads '0*' or '1*' while a trigger holds the event in soft
    mode; the asterisk is the trigger's state, which perfline never touches, and the
    kernel rejects it on write.
    """
    return value.rstrip("*")


class TracefsCycle(Benchmark):
    """The seed's loop over one control file; subclasses choose the file and its values.

    `iterations` times: for each value of the cycle, write it to the control file, then
    tracing_on 1 and 0. The control file and tracing_on are restored at teardown, and
    tracefs unmounted if perfline mounted it.
    """

    def __init__(self, params: Mapping[str, ParamValue], workdir: Path) -> None:
        super().__init__(params, workdir)
        # Undo actions in reverse order of setup: restore tracefs files, then unmount.
        self._undo = ExitStack()
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
    def refused(self, value: str, exc: OSError) -> str:
        """The message when the kernel refuses writing `value` to the control file."""

    def setup(self) -> None:
        if os.geteuid() != 0:
            raise BenchmarkUnavailable(f"{self.name} writes to tracefs and must run as root")
        self.tracefs = self._find_tracefs()
        self._control, self._cycle = self.prepare()
        self._keep(self._control, "tracing_on")
        # Each value once, so that a kernel refusal is reported before any repetition.
        for value in dict.fromkeys(self._cycle):
            try:
                write(self.tracefs / self._control, value)
            except OSError as exc:
                raise BenchmarkUnavailable(self.refused(value, exc)) from exc

    def read(self, name: str) -> str:
        """A tracefs file's content; BenchmarkUnavailable saying why when it cannot be read."""
        try:
            return (self.tracefs / name).read_text().strip()
        except OSError as exc:
            raise BenchmarkUnavailable(f"cannot read {exc.filename} ({refusal(exc)})") from exc

    def _keep(self, *names: str) -> None:
        """Write these files back, in this order, at teardown."""
        saved = [(name, restorable(self.read(name))) for name in names]
        self._undo.callback(self._restore, saved)

    def _restore(self, saved: list[tuple[str, str]]) -> None:
        for name, value in saved:
            write(self.tracefs / name, value)

    def _find_tracefs(self) -> Path:
        if (TRACEFS / "tracing_on").exists():
            return TRACEFS
        if TRACEFS.is_dir():
            try:
                self._mounted_tracefs = self._undo.enter_context(mounted("tracefs", TRACEFS))
            except ToolMissing as exc:
                raise BenchmarkUnavailable(str(exc)) from exc
            except CommandFailed as exc:
                raise BenchmarkUnavailable(
                    f"cannot mount tracefs on {TRACEFS}: {exc.output_tail}"
                ) from exc
            return TRACEFS
        if (DEBUGFS_TRACING / "tracing_on").exists():
            return DEBUGFS_TRACING
        raise BenchmarkUnavailable(
            f"no tracefs at {TRACEFS} or {DEBUGFS_TRACING}: kernel built without CONFIG_FTRACE?"
        )

    def run_once(self) -> list[Measurement]:
        control = self.tracefs / self._control
        tracing_on = self.tracefs / "tracing_on"
        try:
            start = time.perf_counter()
            for _ in range(int(self.values["iterations"])):
                for value in self._cycle:
                    write(control, value)
                    write(tracing_on, "1")
                    write(tracing_on, "0")
            elapsed = time.perf_counter() - start
        except OSError as exc:
            raise BenchmarkFailed(f"{self.name}: writing to tracefs failed: {exc}") from exc
        (seconds,) = self.metrics
        return [Measurement(seconds, elapsed)]

    def teardown(self) -> None:
        try:
            self._undo.close()
        except (OSError, ToolMissing, CommandFailed) as exc:
            log.error("%s could not restore tracefs (%s): %s", self.name, self.tracefs, exc)

    def settings(self) -> dict[str, Any]:
        return {"tracefs": str(self.tracefs), "tracefs_mounted_by_perfline": self._mounted_tracefs}
