"""How perfline's help reads: commands in panels by what a user is doing, flags as flags."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

if TYPE_CHECKING:
    # Typer carries its own copy of click; its commands' methods are typed with it.
    from typer._click import Context, Parameter

# The panels of `perfline --help`, in the order a user meets them.
MEASURE = "Measure"
COMPARE = "Compare"
TRACK = "Track and report"
KERNELS = "Kernels"
FLEET = "Fleet"
INTEROP = "Import and export"
MACHINE = "This machine"
PANELS = (MEASURE, COMPARE, TRACK, KERNELS, FLEET, INTEROP, MACHINE)


def _flags_without_type(params: list[Parameter]) -> list[Parameter]:
    # Typer 0.29 prints a flag's type in the help panel (`--json <bool>`), as if it took
    # a value; an empty metavar leaves the column blank. Only flags: an option that takes
    # a value keeps its type.
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class Command(TyperCommand):
    def get_params(self, ctx: Context) -> list[Parameter]:
        return _flags_without_type(super().get_params(ctx))


class Group(TyperGroup):
    def get_params(self, ctx: Context) -> list[Parameter]:
        return _flags_without_type(super().get_params(ctx))

    def list_commands(self, ctx: Context) -> list[str]:
        # Typer lists a group's commands before its sub-groups; the help shows the
        # panels in PANELS' order, each with its commands as they were registered.
        def panel(name: str) -> int:
            title = getattr(self.commands[name], "rich_help_panel", None)
            return PANELS.index(title) if title in PANELS else len(PANELS)

        return sorted(super().list_commands(ctx), key=panel)


class App(typer.Typer):
    """A Typer app whose commands and sub-groups print their help as above."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("no_args_is_help", True)
        super().__init__(cls=Group, add_completion=False, **kwargs)

    def command(  # type: ignore[override]
        self, name: str | None = None, **kwargs: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return super().command(name, cls=Command, **kwargs)
