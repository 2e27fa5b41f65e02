"""Files that must be whole or absent, even when perfline is killed while writing them."""

from __future__ import annotations

import os
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
