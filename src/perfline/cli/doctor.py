"""`perfline doctor`: what on this machine will disturb measurements, and the fixes;
and where `perfline tune`'s items stand."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from perfline.cli.common import console, fail
from perfline.system import tuning
from perfline.system.disturbances import find
from perfline.targets.local import pid_alive


def doctor(
    cpus: Annotated[
        str | None, typer.Option(metavar="CPULIST", help="The benchmark's CPUs, for the tuning items (default: isolcpus).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
) -> None:
    """What on this machine will disturb measurements, each with the command that fixes it,
    and each `perfline tune` item marked tuned, untuned or unavailable (with why).
    Exits 1 when a disturbance was found, so scripts can wait for a quiet machine.

    Example: perfline doctor
    """
    try:
        items = tuning.plan(tuning.benchmark_cpus(cpus))
    except ValueError:
        raise fail(f"--cpus {cpus!r}: give a CPU list such as 1 or 2-3,5") from None
    found = find(pid_alive, busy_interval_s=1.0)
    if as_json:
        print(json.dumps({
            "disturbances": [{"what": d.what, "detail": d.detail, "fix": d.fix} for d in found],
            "tuning": [{"item": i.name, "state": i.state, "detail": i.detail, "reading": i.reading} for i in items],
        }, indent=2))
    else:
        if not found:
            console.print("nothing found that disturbs measurements")
        else:
            table = Table(title="what will disturb measurements here", title_justify="left")
            table.add_column("what", style="yellow", no_wrap=True)
            table.add_column("found")
            table.add_column("fix", style="cyan")
            for disturbance in found:
                table.add_row(disturbance.what, disturbance.detail, disturbance.fix)
            console.print(table)
        tuned = Table(title="perfline tune's items (perfline tune [--cpus LIST] sets them)", title_justify="left")
        tuned.add_column("item", no_wrap=True)
        tuned.add_column("state", no_wrap=True)
        tuned.add_column("detail")
        for item in items:
            style = {tuning.TUNED: "green", tuning.UNTUNED: "yellow"}.get(item.state, "dim")
            detail = f"{item.detail} ({item.reading})" if item.reading else item.detail
            tuned.add_row(item.name, f"[{style}]{item.state}[/]", escape(detail))
        console.print(tuned)
    if found:
        raise typer.Exit(1)
