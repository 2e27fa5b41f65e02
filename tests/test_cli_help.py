"""`perfline --help` and every command's help, as a user reads them."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from perfline.cli.app import app
from perfline.cli.help_style import PANELS

SRC = Path(__file__).resolve().parents[1] / "src" / "perfline"


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def _commands() -> dict[str, object]:
    """Every command and group by its path, e.g. 'track run'."""
    found: dict[str, object] = {}

    def walk(command: object, path: list[str]) -> None:
        found[" ".join(path)] = command
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def _module_names() -> set[str]:
    """perfline's modules as docs/architecture.md names them: `cli.errors`, `bisect.worktree`."""
    names = set()
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        if len(parts) >= 2 and parts[-1] != "__init__":
            names.add(".".join(parts))
    return names


def test_top_help_groups_commands_in_panels_in_order() -> None:
    text = _help()
    titles = re.findall(r"╭─ ([^─]+?) ─", text)
    assert titles == ["Options", *PANELS]
    for panel, command in (("Measure", "run"), ("Compare", "compare"), ("Track and report", "track"),
                           ("Kernels", "kernels"), ("Fleet", "worker"), ("Import and export", "import"),
                           ("This machine", "doctor")):
        block = text.split(f"╭─ {panel} ")[1].split("╰")[0]
        assert re.search(rf"│ {command}\s", block), (panel, command, block)


@pytest.mark.parametrize("args", [(), ("run",), ("track", "run"), ("import",), ("bisect", "start")])
def test_flags_are_shown_without_a_type(args: tuple[str, ...]) -> None:
    text = _help(*args)
    assert "--help" in text
    assert "<bool>" not in text
    # A flag that is off unless given has no --no- twin to read past.
    assert "--no-dry-run" not in text and "--no-force" not in text
    # An option that takes a value still shows its type.
    assert "<str>" in text or "<path>" in text or "<int>" in text or args == ()


def test_every_command_ends_with_one_example_of_itself() -> None:
    commands = _commands()
    assert len(commands) > 40
    for path, command in commands.items():
        paragraphs = [p.strip() for p in (getattr(command, "help", None) or "").strip().split("\n\n")]
        examples = [p for p in paragraphs if p.startswith("Example:")]
        assert len(examples) == 1 and paragraphs[-1] == examples[0], (path or "perfline", paragraphs)
        words = shlex.split(examples[0].removeprefix("Example:"))
        assert words[0] == "perfline"
        if path:
            assert words[1:1 + len(path.split())] == path.split(), (path, examples[0])


def test_help_names_no_internal_module() -> None:
    modules = _module_names()
    assert "cli.errors" in modules and "bisect.worktree" in modules
    texts = []
    for path, command in _commands().items():
        texts.append((path, getattr(command, "help", None) or ""))
        for param in getattr(command, "params", []):
            texts.append((f"{path} {param.name}", getattr(param, "help", None) or ""))
    for where, text in texts:
        named = {m for m in modules if re.search(rf"(?<![\w.]){re.escape(m)}(?![\w])", text)}
        assert not named and "perfline." not in text, (where, named, text)
