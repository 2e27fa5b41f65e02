"""`perfline tune`: a quiet machine until `perfline tune --reset` (or a reboot)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from perfline.cli.common import EXIT_FAILED, console, fail
from perfline.system import tuning
from perfline.system.journal import own_journal, state_dir
from perfline.system.kernel_state import KernelState
from perfline.targets import local


def tune(
    cpus: Annotated[
        str | None,
        typer.Option(metavar="CPULIST", help="The benchmark's CPUs, kept free of interrupts (default: isolcpus)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would change; change nothing.")] = False,
    reset: Annotated[bool, typer.Option("--reset", help="Put back everything `perfline tune` changed.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the items as JSON.")] = False,
) -> None:
    """Tune this machine for benchmarking: governor performance, minimum frequency at the
    maximum, turbo off, interrupts off the benchmark CPUs, perf sampling at 1 Hz, NMI
    watchdog off; isolcpus, nohz_full and rcu_nocbs checked. Each change is journaled
    (a killed tune is put back by the next command); `--reset` undoes the tune.

    Example: perfline tune --cpus 1 --dry-run
    """
    if reset:
        _reset(as_json)
        return
    try:
        chosen = tuning.benchmark_cpus(cpus)
    except ValueError:
        raise fail(f"--cpus {cpus!r}: give a CPU list such as 1 or 2-3,5") from None
    if unknown := chosen - tuning.online_cpus():
        raise fail(f"--cpus {cpus}: CPU {tuning.format_cpu_list(unknown)} is not online "
                   f"(online: {tuning.format_cpu_list(tuning.online_cpus())})")
    items = tuning.plan(chosen)
    refused: list[str] = []
    if not dry_run:
        kernel = KernelState(own_journal())
        entries, refused = tuning.apply(items, kernel)
        tuning.keep(state_dir(), local.boot_id(), entries, kernel)
    _show(items, dry_run, refused, as_json)
    if chosen and not dry_run and not as_json:
        console.print(f"[dim]run the benchmark on CPUs {tuning.format_cpu_list(chosen)}: --pin "
                      f"{tuning.format_cpu_list(chosen)} (a job's pin:); undo with perfline tune --reset[/dim]")
    if refused:
        raise typer.Exit(EXIT_FAILED)


def _show(items: list[tuning.Item], dry_run: bool, refused: list[str], as_json: bool) -> None:
    if as_json:
        print(json.dumps({
            "dry_run": dry_run,
            "items": [{"item": i.name, "state": i.state, "detail": i.detail, "check_only": i.check_only,
                       "changes": [{"file": str(path), "value": value} for path, value in i.changes]}
                      for i in items],
            "refused": refused,
        }, indent=2))
        return
    table = Table(title="perfline tune" + (" --dry-run: nothing changed" if dry_run else ""), title_justify="left")
    table.add_column("item", no_wrap=True)
    table.add_column("now", no_wrap=True)
    table.add_column("action")
    for item in items:
        table.add_row(item.name, item.state, escape(_action(item, dry_run)))
    console.print(table)
    for line in refused:
        console.print(f"[yellow]refused, left as it was:[/yellow] {escape(line)}")


def _action(item: tuning.Item, dry_run: bool) -> str:
    if item.changes:
        verb = "would set" if dry_run else "set"
        files = ", ".join(f"{path} = {value}" for path, value in item.changes[:3])
        more = f" and {len(item.changes) - 3} more" if len(item.changes) > 3 else ""
        return f"{verb} {files}{more}: {item.detail}"
    if item.state == tuning.TUNED:
        return f"nothing to do: {item.detail}"
    if item.state == tuning.UNAVAILABLE:
        return f"cannot: {item.detail}"
    return f"checked only: {item.detail}" if item.check_only else f"not changed: {item.detail}"


def _reset(as_json: bool) -> None:
    restored, failed = tuning.reset(state_dir(), local.boot_id())
    if as_json:
        print(json.dumps({"restored": [{"file": e.path, "value": e.old} for e in restored],
                          "failed": [{"file": e.path, "value": e.old} for e in failed]}, indent=2))
    elif not restored and not failed:
        console.print("nothing to reset: perfline tune changed nothing since this boot")
    for entry in [] if as_json else restored:
        console.print(f"restored {escape(entry.path)} to {escape(entry.old)!r}")
    if failed:
        raise fail("could not restore " + ", ".join(f"{e.path} to {e.old!r}" for e in failed)
                   + "; run perfline tune --reset again", EXIT_FAILED)
