"""Name → class lookup shared by the benchmark and monitor catalogues.

Entries are import paths so that `perfline list` or a job check does not import every
benchmark's dependencies, and a broken module only breaks its own name.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownName(LookupError):
    """A name that is not in the catalogue; the message suggests the closest ones."""


class Registry(Generic[T]):
    def __init__(self, kind: str, entries: Mapping[str, str]) -> None:
        self.kind = kind
        self._entries = dict(entries)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def suggestion(self, name: str) -> str:
        close = difflib.get_close_matches(name, self._entries, n=3, cutoff=0.5)
        options = close or self.names()
        return f"did you mean {' or '.join(options)}?" if close else f"known: {', '.join(options)}"

    def get(self, name: str) -> type[T]:
        if name not in self._entries:
            raise UnknownName(f"unknown {self.kind} {name!r}: {self.suggestion(name)}")
        module_name, _, attr = self._entries[name].partition(":")
        cls: type[T] = getattr(importlib.import_module(module_name), attr)
        return cls

    def all(self) -> list[type[T]]:
        return [self.get(name) for name in self.names()]
