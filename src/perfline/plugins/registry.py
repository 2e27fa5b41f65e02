"""Name → class lookup shared by the benchmark and monitor catalogues.

Entries are import paths so that `perfline list` or a job check does not import every
benchmark's dependencies, and a broken module only breaks its own name.

Other distributions add entries through Python entry points (group `perfline.benchmarks`
or `perfline.monitors`; the entry point's name is the name a job file uses). They are
read when a name is first looked up, so installing a plugin into the environment is all
it takes. A plugin cannot replace a built-in name: a job that says `tbench` must mean
the same benchmark on every machine, whatever else is installed there.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class UnknownName(LookupError):
    """A name that is not in the catalogue; the message suggests the closest ones."""


class BrokenPlugin(LookupError):
    """An entry point that does not load, or loads something that is not a `kind`."""


class Registry(Generic[T]):
    def __init__(self, kind: str, entries: Mapping[str, str], group: str, base: type) -> None:
        # `base` is a plain `type`: the catalogues' bases are abstract, which `type[T]` refuses.
        self.kind = kind
        self.group = group
        self.base = base
        self._builtin = dict(entries)
        self._plugins: dict[str, EntryPoint] | None = None

    def plugins(self) -> dict[str, EntryPoint]:
        """Entry points of installed distributions, by name; built-in names win."""
        if self._plugins is None:
            found = entry_points(group=self.group)
            self._plugins = {ep.name: ep for ep in found if ep.name not in self._builtin}
        return self._plugins

    def origin(self, name: str) -> str:
        """Where a name comes from: `perfline`, or the distribution that provides it."""
        if name in self._builtin:
            return "perfline"
        dist = self.plugins()[name].dist
        return f"{dist.name} {dist.version}" if dist is not None else self.plugins()[name].value

    def names(self) -> list[str]:
        return sorted({*self._builtin, *self.plugins()})

    def __contains__(self, name: object) -> bool:
        return name in self._builtin or name in self.plugins()

    def suggestion(self, name: str) -> str:
        names = self.names()
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        return f"did you mean {' or '.join(close)}?" if close else f"known: {', '.join(names)}"

    def get(self, name: str) -> type[T]:
        if name in self._builtin:
            module_name, _, attr = self._builtin[name].partition(":")
            cls: type[T] = getattr(importlib.import_module(module_name), attr)
            return cls
        if name not in self.plugins():
            raise UnknownName(f"unknown {self.kind} {name!r}: {self.suggestion(name)}")
        return self._load(self.plugins()[name])

    def _load(self, ep: EntryPoint) -> type[T]:
        where = f"entry point {ep.name} = {ep.value} (group {self.group})"
        try:
            loaded = ep.load()
        # Whatever a plugin's import raises is that plugin's failure, not perfline's.
        except Exception as exc:
            raise BrokenPlugin(f"{self.kind} {ep.name!r}: {where} does not load: {type(exc).__name__}: {exc}") from exc
        if not (isinstance(loaded, type) and issubclass(loaded, self.base)):
            raise BrokenPlugin(f"{self.kind} {ep.name!r}: {where} is not a subclass of {self.base.__qualname__}")
        own_name = getattr(loaded, "name", ep.name)
        if own_name != ep.name:
            raise BrokenPlugin(f"{self.kind} {ep.name!r}: {where} names itself {own_name!r}; use one name in both")
        return cast("type[T]", loaded)

    def all(self) -> list[type[T]]:
        """Every class that loads: one broken plugin must not hide the others."""
        return [cls for cls, _ in self._load_all() if cls is not None]

    def problems(self) -> list[str]:
        """Why each plugin that does not load does not, for `perfline list` to show."""
        return [problem for _, problem in self._load_all() if problem]

    def _load_all(self) -> list[tuple[type[T] | None, str]]:
        loaded: list[tuple[type[T] | None, str]] = []
        for name in self.names():
            try:
                loaded.append((self.get(name), ""))
            except BrokenPlugin as exc:
                loaded.append((None, str(exc)))
        return loaded
