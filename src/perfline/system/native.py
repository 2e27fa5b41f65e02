"""Where the small C helpers built by `make native` live: programs, and libraries loaded with ctypes."""

from __future__ import annotations

import os
from pathlib import Path

from perfline.system.process import ToolMissing

# The package is installed editable from src/: the checkout is above src/perfline/system/
CHECKOUT = Path(__file__).resolve().parents[3]
NATIVE_DIR_ENV = "PERFLINE_NATIVE_DIR"


def native_dir() -> Path:
    """$PERFLINE_NATIVE_DIR when set (an installed copy elsewhere), else native/build."""
    override = os.environ.get(NATIVE_DIR_ENV)
    return Path(override) if override else CHECKOUT / "native" / "build"


def native_binary(name: str) -> Path:
    """Path of the helper `name`, or ToolMissing saying how to build it."""
    return _built(name, os.X_OK)


def native_library(name: str) -> Path:
    """Path of the shared library libNAME.so (native/lib/NAME.c), or ToolMissing saying how to build it."""
    return _built(f"lib{name}.so", os.R_OK)


def _built(name: str, access: int) -> Path:
    path = native_dir() / name
    if not os.access(path, access):
        raise ToolMissing(
            f"native helper {name} not found at {path}: run `make native` in {CHECKOUT}"
            + (f" or fix ${NATIVE_DIR_ENV}" if NATIVE_DIR_ENV in os.environ else "")
        )
    return path
