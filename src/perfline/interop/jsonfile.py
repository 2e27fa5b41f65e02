"""Reading a JSON result file safely: size-capped, errors with line numbers, and the
bare NaN/Infinity literals that asv and Python's json write accepted as such."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perfline.interop.model import ImportFailed

# A result file bigger than this is not a result file (and would be read whole).
MAX_BYTES = 256 * 2**20


def read_bytes(path: Path) -> bytes:
    """The file's bytes, refused unread when it is larger than a result file can be."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ImportFailed(path, f"{size / 2**20:.0f} MiB: larger than any result file "
                                     f"({MAX_BYTES // 2**20} MiB at most)")
        return path.read_bytes()
    except OSError as exc:
        raise ImportFailed(path, f"cannot read: {exc.strerror}") from None


def read_text(path: Path) -> str:
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFailed(path, "not UTF-8 text", data[: exc.start].count(b"\n") + 1) from None


def load(path: Path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFailed(path, f"not valid JSON: {exc.msg}", exc.lineno) from None
    except RecursionError:
        raise ImportFailed(path, "JSON nested too deeply") from None


def need(path: Path, value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """`value` if it is of `kind`, else an ImportFailed naming the field."""
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple)
                                                                              else (kind,))):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ImportFailed(path, f"{where}: expected {names}, got {type(value).__name__}")
    return value
