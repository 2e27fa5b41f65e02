"""`perfline doctor`: what on this machine will disturb measurements, and the fixes."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from perfline.cli.common import console
from perfline.system.disturbances import find
from perfline.targets.local import pid_alive


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
) -> None:
    """What on this machine will disturb measurements, each with the command that fixes it.
    Exits 1 when something was found, so scripts can wait for a quiet machine.

    Example: perfline doctor
    """
    found = find(pid_alive, busy_interval_s=1.0)
    if as_json:
        print(json.dumps([{"what": d.what, "detail": d.detail, "fix": d.fix} for d in found], indent=2))
    elif not found:
        console.print("nothing found that disturbs measurements")
    else:
        table = Table(title="what will disturb measurements here", title_justify="left")
        table.add_column("what", style="yellow", no_wrap=True)
        table.add_column("found")
        table.add_column("fix", style="cyan")
        for disturbance in found:
            table.add_row(disturbance.what, disturbance.detail, disturbance.fix)
        console.print(table)
    if found:
        raise typer.Exit(1)
