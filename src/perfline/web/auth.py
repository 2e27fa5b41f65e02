"""Who may triage: bearer tokens from a file, one per line, `NAME TOKEN` or `TOKEN`."""

from __future__ import annotations

import hmac
from pathlib import Path

from perfline.records.errors import UserError


class Tokens:
    def __init__(self, named: dict[str, str]) -> None:
        self._named = named  # token -> who

    @classmethod
    def load(cls, path: Path | None) -> Tokens:
        if path is None:
            return cls({})
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise UserError(f"cannot read the token file: {exc.strerror}", path) from None
        named = {}
        for number, line in enumerate(lines, start=1):
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if len(parts) > 2 or len(parts[-1]) < 16:
                raise UserError("a line is `NAME TOKEN` or `TOKEN`, the token at least 16 characters", path, number)
            named[parts[-1]] = parts[0] if len(parts) == 2 else "token"
        return cls(named)

    def __bool__(self) -> bool:
        return bool(self._named)

    def who(self, authorization: str | None) -> str | None:
        """The name behind `Authorization: Bearer TOKEN`, or None (compared in constant time)."""
        if not authorization or not authorization.startswith("Bearer "):
            return None
        given = authorization.removeprefix("Bearer ").strip()
        for token, name in self._named.items():
            if hmac.compare_digest(token.encode(), given.encode()):
                return name
        return None
