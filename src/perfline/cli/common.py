"""What every perfline command shares: consoles, the store, errors, the run context."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from perfline.system.journal import state_dir
from perfline.system.kernel_state import restore_leftovers
from perfline.targets import local

if TYPE_CHECKING:
    from perfline.records.fingerprint import Fingerprint
    from perfline.records.job import Case
    from perfline.runner import RunContext
    from perfline.store import Store
    from perfline.store.kexec_boots import KexecBoot

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130

# Tables are wide; when stdout is a pipe or file, 80 columns would fold every row.
console = Console(width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True)


class State:
    """Options of the top-level callback that every command needs."""

    db: str | None = None


state = State()


def restore_crashed_changes() -> int:
    """Before anything else: put back what a crashed perfline left changed (tunables,
    tracefs files, a tracefs mount), and say so."""
    messages = restore_leftovers(state_dir(), local.boot_id(), local.pid_alive)
    for message in messages:
        errors.print(f"[yellow]{escape(message)}[/yellow]", highlight=False, soft_wrap=True)
    return len(messages)


def notify(message: str) -> None:
    """A line of progress or news on stderr, stored strings shown as text."""
    errors.print(escape(message), highlight=False, soft_wrap=True)


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    errors.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def open_store(url: str | None = None, outage_wait_s: float = 0.0) -> Store:
    """The store (`url`, else --db / $PERFLINE_DB), with this host's dead runs marked."""
    # SQLAlchemy and the store's modules: when a command opens it, not at every start
    # (0.5 s of CPU, `perfline --help` included; bench/startup.py).
    from perfline.store import Store

    store = Store.open(url or state.db, outage_wait_s)
    reaped = store.reap_dead_runs(local.boot_id(), local.hostname(), local.pid_alive)
    if reaped:
        errors.print(f"[yellow]marked {reaped} run(s) interrupted: their process had died[/yellow]")
    return store


@contextmanager
def running(
    store: Store, cases: list[Case], label: str | None, kernel_commit: str | None,
    kexec_boot: KexecBoot | None = None,
) -> Iterator[RunContext]:
    """Progress on stderr, SIGTERM as Ctrl-C, and exit code 130 after an interruption."""
    # Imported here: the runner and its targets are slow to import, and the commands
    # which only read the store (compare, history, show) do not need them.
    from perfline.cli.progress import ProgressObserver
    from perfline.runner import RunContext, terminate_as_interrupt
    from perfline.runner.kexec_resume import boot_fingerprint

    fingerprint: Callable[[], Fingerprint] = local.fingerprint
    if kexec_boot is not None:
        booted = kexec_boot

        def fingerprint() -> Fingerprint:
            return boot_fingerprint(local.fingerprint(), booted)

    with ProgressObserver(errors, cases) as observer, terminate_as_interrupt():
        try:
            yield RunContext(
                store=store,
                fingerprint=fingerprint,
                observer=observer,
                kexec_boot=None if kexec_boot is None else kexec_boot.id,
                # A worker's kernel job: the runs join its attempt, as on the worker.
                fleet_attempt=None if kexec_boot is None else kexec_boot.fleet_attempt,
                label=label,
                kernel_commit=kernel_commit,
            )
        except KeyboardInterrupt:
            observer.stop()
            errors.print("[yellow]interrupted: finished repetitions are stored[/yellow]")
            raise typer.Exit(EXIT_INTERRUPTED) from None
