"""The one way perfline changes kernel state: journal the old value, then write.

Tunables (sysctls, sysfs knobs, governors), the ftrace benchmarks' tracefs files
(`current_tracer`, `tracing_on`, `events/**/enable`, a tracefs mount) and the cgroup
the benchmark's tasks run in (`system.cgroup`) all go through
`KernelState`: the old value reaches the journal (fsync'd) before the first write, so a
perfline killed at any moment leaves a journal that the next perfline command restores
(`restore_leftovers`). A benchmark gets one as `self.kernel`; tests/test_crash_safety.py
checks that no benchmark or monitor writes a file any other way.

A file a benchmark writes thousands of times (tracing_on in the ftrace loop) is
journaled once (`hold`) and then written with `write`, which refuses a file that was
not journaled first.
"""

from __future__ import annotations

import errno
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from perfline.system.files import write_durably
from perfline.system.journal import CGROUP, MOUNT, SYSTEMD_DROP_IN, WRITE, Entry, Journal, leftovers
from perfline.system.process import CommandFailed, ToolMissing, require_tool, run

LOCKDOWN = Path("/sys/kernel/security/lockdown")
# How long removing a cgroup retries while it is busy: a task of it may be exiting, or
# forking a child into it, between the look at cgroup.procs and the rmdir.
CGROUP_BUSY_S = 2.0


class KernelStateError(RuntimeError):
    """A kernel file could not be read, written or restored; says which and why."""

    def __init__(self, path: Path, reason: str, errno_: int | None = None) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.errno = errno_


def read_restorable(path: Path) -> str:
    """What to write back to `path` to restore what it reads now.

    A selection file (`always [madvise] never`, a governor list) restores to the selected
    word. An event's enable file reads `0*` or `1*` while a trigger holds it in soft
    mode; the asterisk is the trigger's state, which perfline never touches and the
    kernel rejects on write.
    """
    text = path.read_text().strip()
    selected = re.search(r"\[([^\]]+)\]", text)
    return (selected.group(1) if selected else text).rstrip("*")


def write_value(path: Path, value: str) -> None:
    """One open-write-close, as `echo value > file` does: sysfs and tracefs act on each write."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def refusal(exc: OSError, value: str) -> str:
    """Why the kernel refused writing `value`, in words."""
    if exc.errno == errno.EPERM:
        return f"the kernel refused the write (EPERM{_lockdown()})"
    if exc.errno in (errno.EACCES, errno.EROFS):
        return "read-only: it cannot be changed at run time (EACCES)"
    if exc.errno == errno.EINVAL:
        return f"the kernel rejected the value {value!r} (EINVAL)"
    if exc.errno == errno.ENOENT:
        return "no such file"
    return f"{exc.strerror} (errno {exc.errno})"


def lockdown_mode(text: str) -> str | None:
    """The active mode of /sys/kernel/security/lockdown, e.g. 'none [integrity] confidentiality'."""
    found = re.search(r"\[(\w+)\]", text)
    return found.group(1) if found else None


def _lockdown() -> str:
    try:
        mode = lockdown_mode(LOCKDOWN.read_text())
    except OSError:
        return ""
    return f"; kernel lockdown: {mode}" if mode and mode != "none" else ""


def is_mounted(fstype: str, target: Path) -> bool:
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        return any(
            fields[1] == str(target) and fields[2] == fstype
            for fields in (line.split() for line in mounts)
        )


class KernelState:
    """Changes to kernel files and mounts, each journaled before it is made."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._held: Counter[str] = Counter()

    def hold(self, changes: Sequence[tuple[Path, str]]) -> list[Entry]:
        """Journal the current value of each file, as one fsync'd record, before any is
        written; `changes` pairs a file with the first value it will be given. Raises
        KernelStateError when a file cannot be read (nothing is journaled then)."""
        entries = []
        for path, new in changes:
            try:
                entries.append(Entry(str(path), read_restorable(path), new))
            except OSError as exc:
                reason = "no such file" if exc.errno == errno.ENOENT else f"cannot read it: {exc.strerror}"
                raise KernelStateError(path, reason) from None
        self.journal.record(entries)
        self._held.update(e.path for e in entries)
        return entries

    def write(self, path: Path, value: str) -> None:
        """Write a file this process holds; KernelStateError with the reason on refusal."""
        if not self._held[str(path)]:
            raise RuntimeError(f"{path} is written before its old value was journaled; hold() it first")
        try:
            write_value(path, value)
        except OSError as exc:
            raise KernelStateError(path, refusal(exc, value), exc.errno) from None

    def set(self, changes: Sequence[tuple[Path, str]]) -> list[Entry]:
        """Journal every file, then write each; when one is refused, the ones written are
        restored and the KernelStateError raised. Returns the entries to `restore`."""
        entries = self.hold(changes)
        for done, entry in enumerate(entries):
            try:
                self.write(Path(entry.path), entry.new)
            except KernelStateError:
                self.restore(entries[:done])
                self.release(entries[done:])
                raise
        return entries

    def mount(self, fstype: str, target: Path) -> Entry | None:
        """Mount `fstype` on `target` unless it is already; the entry unmounts it."""
        if is_mounted(fstype, target):
            return None
        entry = Entry(str(target), "", fstype, MOUNT)
        self.journal.record([entry])
        try:
            mount_fs(fstype, target)
        except (ToolMissing, CommandFailed):
            self.journal.forget([entry])
            raise
        return entry

    @contextmanager
    def mounted(self, fstype: str, target: Path) -> Iterator[bool]:
        """`fstype` mounted on `target` for the block; yields whether this mounted it.
        Raises ToolMissing or CommandFailed when it cannot be mounted."""
        entry = self.mount(fstype, target)
        try:
            yield entry is not None
        finally:
            if entry is not None:
                self.restore([entry])

    def make_cgroup(self, path: Path) -> Entry:
        """Make the cgroup directory `path` (OSError as mkdir raises it); the entry removes it."""
        entry = Entry(str(path), "", "", CGROUP)
        self.journal.record([entry])
        try:
            path.mkdir()
        except OSError:
            self.journal.forget([entry])
            raise
        return entry

    def systemd_drop_in(self, path: Path, text: str) -> Entry:
        """Write a drop-in of systemd's manager configuration (system.conf.d) and have
        systemd read it (`systemctl daemon-reexec`: system.conf is read only at its
        start); the entry removes it and re-executes systemd again. Raises CommandFailed
        or ToolMissing, with nothing left changed, when systemd does not take it."""
        entry = Entry(str(path), "", text, SYSTEMD_DROP_IN)
        self.journal.record([entry])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_durably(path, text)
            reexec_systemd()
        except BaseException:
            failures = undo([entry])
            if not failures:
                self.journal.forget([entry])
            raise
        return entry

    def restore(self, entries: Sequence[Entry]) -> list[Entry]:
        """Undo `entries`, newest first; returns those that could not be undone, which
        stay in the journal for `perfline restore` (or the next command) to retry."""
        failures = undo(entries)
        self.release([e for e in entries if e not in failures])
        return failures

    def release(self, entries: Sequence[Entry]) -> None:
        """Forget entries that need no restoring (never written, or restored)."""
        self._held.subtract(e.path for e in entries)
        self.journal.forget(list(entries))


def undo(entries: Sequence[Entry]) -> list[Entry]:
    """Write old values back and unmount what was mounted, newest first; the failures."""
    failures = []
    for entry in reversed(entries):
        try:
            if entry.kind == WRITE:
                write_value(Path(entry.path), entry.old)
            elif entry.kind == MOUNT and is_mounted(entry.new, Path(entry.path)):
                run([require_tool("umount", "mount"), entry.path], timeout=30)
            elif entry.kind == CGROUP:
                remove_cgroup(Path(entry.path))
            elif entry.kind == SYSTEMD_DROP_IN:
                Path(entry.path).unlink(missing_ok=True)
                reexec_systemd()
        except (OSError, ToolMissing, CommandFailed):
            failures.append(entry)
    return failures


def remount_for_writes(entries: Sequence[Entry]) -> None:
    """Mount again, until `undo` unmounts it, a file system a crashed run's entries
    mounted that is gone while files in it still wait for their old values (when it
    cannot be mounted, their writes fail and stay in the journal).

    A run undoes newest first, so its tracefs files are written back before it unmounts
    tracefs; killed after the unmount but before its journal forgot the entries, it
    leaves all of them. Only a crashed run's journal is in that state, so only
    `restore_leftovers` calls this. The writes must go through the mount (tracefs keeps
    its values while unmounted), and the mount's own entry, older, then unmounts it again.
    """
    for mount in (e for e in entries if e.kind == MOUNT):
        target = Path(mount.path)
        waiting = any(e.kind == WRITE and target in Path(e.path).parents for e in entries)
        if waiting and not is_mounted(mount.new, target):
            with suppress(ToolMissing, CommandFailed):
                mount_fs(mount.new, target)


def mount_fs(fstype: str, target: Path) -> None:
    """Mount `fstype` on `target` (CommandFailed, ToolMissing when it cannot be)."""
    run([require_tool("mount", "mount"), "-t", fstype, fstype, str(target)], timeout=30)


def reexec_systemd() -> None:
    """systemd re-executed: it reads its manager configuration (system.conf and its drop-ins) again."""
    run([require_tool("systemctl", "systemd"), "daemon-reexec"], timeout=120)


def remove_cgroup(path: Path) -> None:
    """Remove a cgroup perfline made. Processes still in it (a killed run's command that
    outlived it) are moved to the parent group first: they finish there, as they would
    have, rather than being killed by a later command."""
    deadline = time.monotonic() + CGROUP_BUSY_S
    while path.exists():
        for pid in (path / "cgroup.procs").read_text().split():
            with suppress(ProcessLookupError):  # exited since the look
                write_value(path.parent / "cgroup.procs", pid)
        try:
            path.rmdir()
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def restore_leftovers(directory: Path, boot_id: str, alive: Callable[[int], bool]) -> list[str]:
    """Restore what crashed perfline processes left changed; one message per change."""
    messages = []
    for path, entries in leftovers(directory, boot_id, alive):
        # What the crashed run left, read before the restore: a run killed while it
        # undid its own changes has put some back already, and those are not news.
        mounted = {e for e in entries if e.kind == MOUNT and is_mounted(e.new, Path(e.path))}
        remount_for_writes(entries)
        left = {e: _restorable_or_none(Path(e.path)) for e in entries if e.kind == WRITE}
        failures = undo(entries)
        for entry in entries:
            failed = entry in failures
            if entry.kind == MOUNT:
                if entry in mounted or failed:
                    verb = "could not unmount" if failed else "unmounted"
                    messages.append(f"{verb} {entry.new} on {entry.path} (mounted by a crashed run)")
            elif entry.kind == CGROUP:
                verb = "could not remove" if failed else "removed"
                messages.append(f"{verb} the cgroup {entry.path} (made by a crashed run)")
            elif entry.kind == SYSTEMD_DROP_IN:
                verb = "could not remove" if failed else "removed"
                messages.append(f"{verb} systemd's drop-in {entry.path} and re-executed systemd (written by a "
                                "crashed kexec boot's start)")
            elif failed or left[entry] != entry.old:
                verb = "could not restore" if failed else "restored"
                found = entry.new if left[entry] is None else left[entry]
                messages.append(f"{verb} {entry.path} to {entry.old!r} (left at {found!r} by a crashed run)")
        if not failures:
            path.unlink(missing_ok=True)
    return messages


def _restorable_or_none(path: Path) -> str | None:
    try:
        return read_restorable(path)
    except OSError:
        return None
