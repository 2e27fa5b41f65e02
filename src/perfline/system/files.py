"""Files that must be whole or absent, even when perfline is killed while writing them."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path


def write_durably(path: Path, text: str) -> None:
    """Write `text` to `path` so that a crash leaves the old file or the new one.

    Written beside it, fsync'd, renamed over it, and the directory fsync'd: the rename
    is the moment the file changes, and it survives a power cut.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_or_empty(path: Path) -> str:
    """A small kernel file's text, stripped; "" when it is missing or unreadable (a
    feature this kernel lacks reads as nothing, for the callers that describe state)."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (made if missing): processes of this host that
    share perfline's cache (workers, a tracker beside a bisection) take turns. The
    kernel drops the lock with its holder, so a killed holder never leaves it held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Held(RuntimeError):
    """Another process holds the lock; the message is what it wrote in the file (its pid
    and since when)."""


@contextmanager
def held_alone(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (made if missing), or raise Held at once, without
    waiting, when another process holds it. The holder writes its pid and the time into
    the file for the one turned away; a killed holder's lock is dropped by the kernel
    (its words stay in the file until the next holder writes its own)."""
    with _held(path, None, None):
        yield


@contextmanager
def held_in_turn(path: Path, what: str, waiting: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive lock on `path` (made if missing, writable by every user), waiting
    for it when another process holds it: `waiting` is told first, with what the holder
    wrote ("WHAT, pid N since T"; "" if it wrote nothing yet)."""
    with _held(path, what, waiting):
        yield


@contextmanager
def _held(path: Path, what: str | None, waiting: Callable[[str], None] | None) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "r+"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        with contextlib.suppress(PermissionError):  # another user's file, writable by us all the same
            os.fchmod(fd, 0o666)  # past the umask: the next holder may be another user
    except PermissionError:
        # Another user's lock file: flock needs no write access, only the note does.
        fd, mode = os.open(path, os.O_RDONLY), "r"
    with os.fdopen(fd, mode) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            if waiting is None:
                raise Held(holder or "a process") from None
            waiting(holder)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if handle.writable():
                handle.seek(0)
                handle.truncate(0)
                note = f"pid {os.getpid()} since {datetime.now().astimezone():%Y-%m-%d %H:%M:%S %Z}"
                handle.write(f"{what}, {note}" if what else note)
                handle.flush()
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
