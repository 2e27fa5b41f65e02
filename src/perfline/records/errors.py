"""Errors a user causes and can fix: the CLI prints them as one line and exits 2.

Any floor may raise them, so they live on the ground floor. `where` is the file (and
line) the user has to open; the message says what is wrong and, where it can, the fix.
"""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """Bad input or a setting the user can correct; printed as `error: WHERE: message`."""

    def __init__(self, message: str, path: Path | str | None = None, line: int | None = None) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        self.message = message
        super().__init__(f"{self.where}: {message}" if self.where else message)

    @property
    def where(self) -> str:
        if self.path is None:
            return ""
        return f"{self.path}:{self.line}" if self.line is not None else self.path
