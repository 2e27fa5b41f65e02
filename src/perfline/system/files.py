"""Files that must be whole or absent, even when perfline is killed while writing them."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
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
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise Held(handle.read().strip() or "a process") from None
        try:
            handle.truncate(0)
            handle.write(f"pid {os.getpid()} since {datetime.now().astimezone():%Y-%m-%d %H:%M:%S %Z}")
            handle.flush()
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
