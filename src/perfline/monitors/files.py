"""Where a monitor reads the kernel's files: this host's, or a guest's.

A monitor of a case run in a VM must read the guest kernel's /proc and /sys, not the
host's (whose counters would show the emulator). The runner hands each monitor the
files of the system the benchmark runs on and calls `refresh` once before the monitors
start and once before they stop, so that a guest is asked once per look for every file
all its monitors read, not once per file.
"""

from __future__ import annotations

import glob
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Protocol


class Shell(Protocol):
    """Commands run on the system under test, for monitors that need a tool there (a
    guest's own perf); this host's monitors run their tools directly."""

    def sh(self, script: str, timeout: float) -> tuple[int, str, str]:
        """`sh -c script` there: its exit status, stdout and stderr."""
        ...


class SystemFiles(ABC):
    """The files of one running kernel."""

    # Said in messages: "no /proc/schedstat on {where}".
    where: str
    # Where commands run on that system, when it is not this host.
    shell: Shell | None = None

    def refresh(self) -> None:
        """Take a new look; reads until the next refresh see what it saw."""

    @abstractmethod
    def read_text(self, path: str) -> str:
        """The file's text; FileNotFoundError or PermissionError as open() raises them."""

    @abstractmethod
    def glob(self, pattern: str) -> list[str]:
        """The paths matching a shell pattern, sorted."""

    @abstractmethod
    def now(self) -> float:
        """Seconds on a clock that only moves forward, at the time of the last look."""


class HostFiles(SystemFiles):
    """This host's files, read when asked: a look is each read itself."""

    where = "this host"

    def read_text(self, path: str) -> str:
        return Path(path).read_text()

    def glob(self, pattern: str) -> list[str]:
        return sorted(glob.glob(pattern))

    def now(self) -> float:
        return time.monotonic()


HOST = HostFiles()
