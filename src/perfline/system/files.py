"""Files that must be whole or absent, even when perfline is killed while writing them."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
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
