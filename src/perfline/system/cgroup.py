"""The benchmark's own tasks, gathered in a cgroup v2 group of their own for a run.

A task that lives a few milliseconds (a perf bench worker, a tbench client, a cyclictest
thread) is gone before any poll of /proc/PID/task finds it; a cgroup counts it anyway,
because the benchmark's command joins the group before its exec (`process.child_setup`)
and every task it forks or clones starts there. The group's `cpu.pressure` then says
for how long at least one (`some`) or all (`full`) of those tasks were runnable but
waiting for a CPU, and `cpu.stat` how much CPU they used, dead tasks included.

The group is a child of perfline's own cgroup, in the unified (v2) hierarchy wherever
it is mounted: /sys/fs/cgroup on a pure v2 system, /sys/fs/cgroup/unified on a hybrid
one. A child of a cgroup that holds a process (perfline) can have no controllers
enabled, so the group changes no CPU weight, quota or placement: the benchmark is
scheduled as it would be without it (perfline in the root cgroup is the exception: the
group then gets the controllers the root enables, with their default, unlimited values).

Only what perfline starts for the benchmark joins: a server it talks to that perfline
did not spawn for it (pgbench's PostgreSQL) is not counted, nor are perfline's load hogs
and monitors. Making the group goes through `KernelState`, so a killed perfline's
group is removed by the next perfline command.
"""

from __future__ import annotations

import errno
import itertools
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from perfline.system.kernel_state import KernelState
from perfline.system.process import run

PROC_MOUNTS = Path("/proc/self/mounts")
PROC_CGROUP = Path("/proc/self/cgroup")
# Said here and of a VM's guest (`targets.guest`).
PSI_MISSING = "cgroups have no cpu.pressure: a kernel without CONFIG_PSI, or booted with psi=0"
# Two runs of one process live at once (interleaved A/B): each has its own group.
_numbers = itertools.count(1)


class CgroupUnavailable(RuntimeError):
    """No group for the benchmark's tasks can be made here; the message says why."""


def unified_mount(mounts: str) -> Path | None:
    """Where the cgroup v2 hierarchy is mounted, from /proc/self/mounts' text."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def own_cgroup(text: str) -> str | None:
    """This process's cgroup in the v2 hierarchy ("/user.slice/..."), from /proc/self/cgroup."""
    for line in text.splitlines():
        if line.startswith("0::"):
            return line.removeprefix("0::")
    return None


@contextmanager
def task_group(kernel: KernelState) -> Iterator[Path]:
    """A new, empty cgroup for the benchmark's tasks, removed on exit (processes still in
    it moved to perfline's own group). CgroupUnavailable says why none can be made."""
    parent = parent_group()
    path = parent / f"perfline-{os.getpid()}-{next(_numbers)}"
    try:
        entry = kernel.make_cgroup(path)
    except OSError as exc:
        advice = "; run as root" if exc.errno in (errno.EACCES, errno.EPERM) else ""
        raise CgroupUnavailable(f"making a cgroup in {parent} was refused ({_reason(exc)}){advice}") from None
    try:
        _check(path)
        yield path
    finally:
        # One that cannot be removed now stays in the journal: the next perfline command
        # removes it and says so. The run's figures do not depend on it, so it goes on.
        kernel.restore([entry])


def parent_group() -> Path:
    """Where the groups are made: this process's own cgroup in the unified hierarchy."""
    mount = unified_mount(PROC_MOUNTS.read_text())
    own = own_cgroup(PROC_CGROUP.read_text())
    if mount is None or own is None:
        raise CgroupUnavailable("no cgroup v2 (unified) hierarchy is mounted (a cgroup v1 only system)")
    return mount / own.lstrip("/")


def _check(path: Path) -> None:
    """A command can join the group, and the kernel keeps its pressure (PSI)."""
    if not (path / "cpu.pressure").exists():
        raise CgroupUnavailable(PSI_MISSING)
    try:
        (path / "cpu.pressure").read_text()
    except OSError as exc:  # EOPNOTSUPP where PSI is compiled in but off
        raise CgroupUnavailable(f"reading {path}/cpu.pressure is refused ({_reason(exc)}); PSI is off") from None
    try:
        run(["true"], timeout=30, cgroup=path)
    except subprocess.SubprocessError:
        raise CgroupUnavailable(f"a command may not join {path} (writing its cgroup.procs is refused)") from None


def _reason(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, str(exc.errno))
