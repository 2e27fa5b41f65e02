"""The floor plan of docs/architecture.md holds: every import points down a floor or
sideways within one, and no two packages or modules import each other in a cycle.

Imports are read with `ast` from the source, deferred (function-level) and
TYPE_CHECKING imports included: a cycle hidden in a function is still a cycle.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
ROOT = SRC / "perfline"

# Floor of each package; the package root (`perfline/__init__.py`: the version) is 0.
FLOORS: dict[str, float] = {
    "__main__": 7,  # `python -m perfline`: the command line's entry
    "cli": 6,
    "web": 5,
    "track": 5,
    "fleet": 5,
    "report": 4,
    "runner": 3,
    "analysis": 3,
    "bisect": 3,
    "interop": 3,
    "store": 2,
    "jobs": 2,
    "targets": 2,
    "git": 2,
    "builds": 2.5,
    "benchmarks": 1,
    "monitors": 1,
    "tunables": 1,
    "stats": 0,
    "records": 0,
    "system": 0,
    "plugins": 0,
}
# The package face: what may sit at the root besides packages.
ROOT_MODULES = {"__init__", "__main__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """The perfline modules `path` imports (`from a import b` counts as a.b when a.b is a
    module, else as a)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "perfline")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "perfline":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if _is_module(sub) else target)
    found.discard(module)
    return found


def _is_module(name: str) -> bool:
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "perfline"


def floor_of(package: str) -> int:
    return 0 if package == "perfline" else FLOORS[package]


MODULES = {module_name(p): imports_of(p) for p in sorted(ROOT.rglob("*.py")) if "migrations" not in p.parts}


def test_every_package_has_a_floor() -> None:
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(FLOORS), f"packages without a floor: {sorted(packages - set(FLOORS))}"
    loose = {p.stem for p in ROOT.glob("*.py")} - ROOT_MODULES
    assert not loose, f"modules at the root (move them into the package of their floor): {sorted(loose)}"


def test_imports_point_down_or_sideways() -> None:
    upward = [
        f"{source} (floor {floor_of(package_of(source))}) imports {target} (floor {floor_of(package_of(target))})"
        for source, targets in MODULES.items()
        for target in sorted(targets)
        if floor_of(package_of(target)) > floor_of(package_of(source))
    ]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_the_ground_floor_imports_nothing_else() -> None:
    """records is the ground floor: the types every package shares, depending on none."""
    outside = [
        f"{source} imports {target}"
        for source, targets in MODULES.items()
        if package_of(source) == "records"
        for target in targets
        if package_of(target) not in ("records", "perfline")
    ]
    assert not outside, "\n".join(outside)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path, or None (iterative DFS, white/grey/black)."""
    state: dict[str, int] = defaultdict(int)
    for start in sorted(graph):
        if state[start]:
            continue
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph.get(start, ())))]
        path = [start]
        state[start] = 1
        while stack:
            node, pending = stack[-1]
            if not pending:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            nxt = pending.pop()
            if state[nxt] == 1:
                return path[path.index(nxt) :] + [nxt]
            if state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(graph.get(nxt, ()))))
    return None


def _without_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's `__init__` re-exports its modules; importing `perfline.x` then stands
    for the module it re-exports, so a module of x importing x's face is not a cycle."""
    packages = {m for m in graph if (SRC.joinpath(*m.split(".")) / "__init__.py").exists()}
    return {m: {t for t in ts if not (t in packages and m.startswith(t + "."))} for m, ts in graph.items()}


@pytest.mark.parametrize("level", ["package", "module"])
def test_no_cycles(level: str) -> None:
    if level == "package":
        graph: dict[str, set[str]] = defaultdict(set)
        for source, targets in MODULES.items():
            for target in targets:
                if package_of(source) != package_of(target):
                    graph[package_of(source)].add(package_of(target))
    else:
        graph = _without_package_inits(MODULES)
    cycle = _cycle(dict(graph))
    assert cycle is None, f"{level} cycle: {' -> '.join(cycle or [])}"


def test_the_rule_catches_an_upward_import_and_a_cycle() -> None:
    """The checks above are not vacuous: a planted upward arrow and cycle are found."""
    assert floor_of(package_of("perfline.cli.app")) > floor_of(package_of("perfline.store.store"))
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
