"""Processes a perfline run starts, found in /proc: for tests that kill perfline and
check what it leaves behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from perfline.system.cgroup import CgroupUnavailable, parent_group

# pid -> start time in clock ticks since boot: tells a live process from a reused pid.
Found = dict[int, str]


def children(parent: int, cmdline: str) -> Found:
    """Live children of `parent` running `cmdline`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(fields[1]) == parent and argv.strip() == cmdline and fields[0] != "Z":
            found[int(entry.name)] = fields[19]
    return found


def still_running(pid: int, started: str) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return False
    return fields[19] == started and fields[0] != "Z"  # a zombie is dead, waiting to be reaped


def sigkill_once_started(proc: subprocess.Popen[str], find: Callable[[], Found], what: str) -> Found:
    """SIGKILL perfline as soon as `find` sees what it starts; returns what it saw."""
    found: Found = {}
    try:
        deadline = time.monotonic() + 120
        while not found:
            assert proc.poll() is None, f"perfline exited early: {proc.communicate()[1]}"
            assert time.monotonic() < deadline, f"no {what} started within 120 s"
            time.sleep(0.05)
            found = find()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    return found


def assert_gone(found: Found, what: str, seconds: float = 30.0) -> None:
    """Every process in `found` ends within `seconds`."""
    deadline = time.monotonic() + seconds
    while left := [pid for pid, started in found.items() if still_running(pid, started)]:
        assert time.monotonic() < deadline, f"{what} {left} outlived the SIGKILLed perfline"
        time.sleep(0.05)


def kill_leftovers(found: Found) -> None:
    """Clean up after a failed assertion, so one failure does not spoil the next test."""
    for pid, started in found.items():
        if still_running(pid, started):
            os.killpg(pid, signal.SIGKILL)


def dead_task_groups() -> list[str]:
    """perfline's task cgroups (perfline-PID-N) whose perfline process is gone."""
    try:
        parent = parent_group()
    except CgroupUnavailable:
        return []
    return sorted(group.name for group in parent.glob("perfline-*-*")
                  if not Path(f"/proc/{group.name.split('-')[1]}").exists())
