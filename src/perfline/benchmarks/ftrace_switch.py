"""ftrace-switch: the tracer-switching loop that exposed an RCU grace-period regression.

Switching tracers waits for RCU grace periods, so this loop's wall time follows RCU
latency (rcutree.jiffies_till_first_fqs, CONFIG_RCU_* options) more than CPU speed.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from perfline.benchmarks.base import (
    Benchmark,
    BenchmarkFailed,
    BenchmarkUnavailable,
    Param,
    ParamValue,
)
from perfline.metric import Direction, Measurement, Metric
from perfline.process import CommandFailed, ToolMissing, require_tool, run

log = logging.getLogger(__name__)

TRACEFS = Path("/sys/kernel/tracing")
# Kernels before 4.1 have tracefs only inside debugfs.
DEBUGFS_TRACING = Path("/sys/kernel/debug/tracing")
SECURITYFS = Path("/sys/kernel/security")


def parse_tracers(text: str) -> list[str]:
    """'function, nop' -> ['function', 'nop']; repeats are kept, they are a valid cycle."""
    return [name.strip() for name in text.split(",") if name.strip()]


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


def _read_lockdown() -> str:
    """The kernel lockdown mode for an error message, mounting securityfs for a moment."""
    try:
        with mounted("securityfs", SECURITYFS):
            return lockdown_mode((SECURITYFS / "lockdown").read_text()) or "unknown"
    except (OSError, ToolMissing, CommandFailed) as exc:
        return f"unknown ({exc})"


def _why(exc: OSError) -> str:
    """errno name of a tracefs refusal; for EPERM also the lockdown mode, the first suspect."""
    reason = errno.errorcode.get(exc.errno or 0, str(exc))
    return f"{reason}; kernel lockdown: {_read_lockdown()}" if exc.errno == errno.EPERM else reason


def _write(path: Path, value: str) -> None:
    # One open-write-close per value, as `echo value > file` does: tracefs acts on each write.
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


class FtraceSwitch(Benchmark):
    name = "ftrace-switch"
    summary = "wall time to switch ftrace tracers and toggle tracing_on, N times (RCU latency)"
    params = (
        Param("iterations", int, 100, "times the whole tracer cycle is run", minimum=1),
        Param(
            "tracers",
            str,
            "function,nop",
            "comma-separated tracers set in turn each iteration; 'blk,nop' works on kernels "
            "that refuse the function tracer (lockdown)",
        ),
    )
    metrics = (
        Metric(
            "ftrace-switch.seconds",
            "s",
            Direction.LOWER,
            "wall time of all iterations of set tracer, tracing_on 1, tracing_on 0",
        ),
    )

    def __init__(self, params: Mapping[str, ParamValue], workdir: Path) -> None:
        super().__init__(params, workdir)
        self._tracers = parse_tracers(str(self.values["tracers"]))
        # Undo actions in reverse order of setup: restore tracer state, then unmount.
        self._undo = ExitStack()
        self._tracefs = TRACEFS
        self._mounted_tracefs = False

    def setup(self) -> None:
        if os.geteuid() != 0:
            raise BenchmarkUnavailable("ftrace-switch writes to tracefs and must run as root")
        if not self._tracers:
            raise BenchmarkUnavailable("ftrace-switch: tracers is empty (e.g. function,nop)")
        self._tracefs = self._find_tracefs()
        try:
            available = (self._tracefs / "available_tracers").read_text().split()
            tracer = (self._tracefs / "current_tracer").read_text().strip()
            tracing_on = (self._tracefs / "tracing_on").read_text().strip()
        except OSError as exc:
            raise BenchmarkUnavailable(f"cannot read {exc.filename} ({_why(exc)})") from exc
        missing = [t for t in self._tracers if t not in available]
        if missing:
            raise BenchmarkUnavailable(
                f"tracer {', '.join(missing)} not in available_tracers ({' '.join(available)}); "
                f"set tracers to available ones, e.g. `tracers: {_suggestion(available, missing)}`"
            )
        # Registered before probing: a refused tracer still leaves current_tracer at nop,
        # because the kernel drops the old tracer before it initialises the new one.
        self._undo.callback(self._restore, tracer, tracing_on)
        for name in dict.fromkeys(self._tracers):
            self._probe(name, available)

    def _find_tracefs(self) -> Path:
        if (TRACEFS / "current_tracer").exists():
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
        if (DEBUGFS_TRACING / "current_tracer").exists():
            return DEBUGFS_TRACING
        raise BenchmarkUnavailable(
            f"no tracefs at {TRACEFS} or {DEBUGFS_TRACING}: kernel built without CONFIG_FTRACE?"
        )

    def _probe(self, tracer: str, available: list[str]) -> None:
        """Set `tracer` once so that a kernel refusal is reported before any repetition."""
        try:
            _write(self._tracefs / "current_tracer", tracer)
        except OSError as exc:
            raise BenchmarkUnavailable(
                f"the kernel refused the {tracer} tracer ({_why(exc)}); choose tracers it allows, "
                f"e.g. `tracers: {_suggestion(available, [tracer])}`"
            ) from exc

    def run_once(self) -> list[Measurement]:
        current_tracer = self._tracefs / "current_tracer"
        tracing_on = self._tracefs / "tracing_on"
        try:
            start = time.perf_counter()
            for _ in range(int(self.values["iterations"])):
                for tracer in self._tracers:
                    _write(current_tracer, tracer)
                    _write(tracing_on, "1")
                    _write(tracing_on, "0")
            elapsed = time.perf_counter() - start
        except OSError as exc:
            raise BenchmarkFailed(f"ftrace-switch: writing to tracefs failed: {exc}") from exc
        (seconds,) = self.metrics
        return [Measurement(seconds, elapsed)]

    def _restore(self, tracer: str, tracing_on: str) -> None:
        _write(self._tracefs / "current_tracer", tracer)
        _write(self._tracefs / "tracing_on", tracing_on)

    def teardown(self) -> None:
        try:
            self._undo.close()
        except (OSError, ToolMissing, CommandFailed) as exc:
            log.error("ftrace-switch could not restore tracefs (%s): %s", self._tracefs, exc)

    def settings(self) -> dict[str, Any]:
        return {"tracefs": str(self._tracefs), "tracefs_mounted_by_perfline": self._mounted_tracefs}


def _suggestion(available: list[str], refused: list[str]) -> str:
    """A tracer cycle from what is left: another tracer and nop ('blk,nop' under lockdown)."""
    others = [t for t in available if t not in refused and t != "nop"]
    return f"{others[0]},nop" if others else "nop,nop"
