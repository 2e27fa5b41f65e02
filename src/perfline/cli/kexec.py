"""Target kexec on the command line: the machine's opt-in, the resume unit, `perfline
resume`, and `run --target kexec` handing its cases over to the boot."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from perfline.cli.common import EXIT_FAILED, console, errors, notify, open_store, running, state
from perfline.records.errors import UserError
from perfline.system.files import write_durably
from perfline.targets import kexec, machine_settings

if TYPE_CHECKING:
    from perfline.records.job import Case
    from perfline.runner.kexec_resume import BootSteps, Resumed
    from perfline.store import Store
    from perfline.store.kexec_boots import KexecBoot, KexecSeries

# `ab --target kexec`: boots a side, unless --blocks says otherwise.
DEFAULT_BLOCKS = 3
# What the resume unit needs of the environment it was installed from.
UNIT_ENVIRONMENT = ("PYTHONPATH", "PERFLINE_CACHE_DIR", "XDG_CACHE_HOME", "PERFLINE_STATE_DIR",
                    "XDG_STATE_HOME", "PERFLINE_NATIVE_DIR", machine_settings.SETTINGS_ENV)


def allow_kexec() -> None:
    """Allow `--target kexec` on this machine: perfline may boot it into kernels under test
    (its administrator's decision; writes /etc/perfline/machine.yaml).

    Example: perfline kernels allow-kexec
    """
    try:
        settings = machine_settings.allow_kexec()
    except PermissionError as exc:
        raise UserError(f"cannot write the machine settings ({exc.strerror}): run this as root",
                        machine_settings.settings_path()) from None
    console.print(f"kexec allowed on this machine ({escape(str(settings.path))}); "
                  "`perfline kernels install-resume` installs the unit that goes on after a boot")


def install_resume(
    unit_dir: Annotated[Path, typer.Option(help="Where systemd reads units.")] = kexec.UNIT_DIR,
) -> None:
    """Install and enable the unit that runs `perfline resume` at every boot, with this
    perfline, its store and its environment.

    Example: perfline kernels install-resume --unit-dir /etc/systemd/system
    """
    from perfline.store import resolve_url  # SQLAlchemy: only here, not at every start

    command = [sys.executable, "-m", "perfline", "--db", resolve_url(state.db), "resume"]
    environment = {key: os.environ[key] for key in UNIT_ENVIRONMENT if os.environ.get(key)}
    unit = unit_dir / kexec.RESUME_UNIT
    wants = unit_dir / "multi-user.target.wants" / kexec.RESUME_UNIT
    try:
        unit_dir.mkdir(parents=True, exist_ok=True)
        write_durably(unit, kexec.resume_unit_text(command, environment))
        wants.parent.mkdir(exist_ok=True)
        if not wants.is_symlink():
            wants.symlink_to(unit)
        settings = machine_settings.set_resume_unit(unit)
    except PermissionError as exc:
        raise UserError(f"cannot write {exc.filename} ({exc.strerror}): run this as root") from None
    if unit_dir == kexec.UNIT_DIR and Path("/run/systemd/system").is_dir():
        from perfline.system.process import run

        run(["systemctl", "daemon-reload"], timeout=60)
    console.print(f"installed and enabled {escape(str(unit))} (recorded in {escape(str(settings.path))})")


def boots(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    limit: Annotated[int, typer.Option(min=1, help="How many boots to list.")] = 20,
) -> None:
    """Kexec boots into kernels under test, newest first: state, runs, console of a failed one.

    Example: perfline kernels boots --json
    """
    listed = open_store().kexec_boots(limit=limit)
    if as_json:
        print(json.dumps([vars(boot) for boot in listed], indent=2, default=str))
        return
    table = Table(title="kexec boots", title_justify="left")
    for column in ("id", "machine", "kernel", "release", "how", "state", "runs", "error"):
        table.add_column(column)
    for boot in listed:
        table.add_row(str(boot.id), boot.hostname, boot.kernel, boot.release, boot.how, boot.state,
                      ", ".join(map(str, boot.run_ids)), boot.error or "")
    console.print(table)


def resume(
    abandon: Annotated[bool, typer.Option("--abandon", help="Give up this machine's open boot instead.")] = False,
) -> None:
    """Go on with this machine's kexec boot after it booted (run by the resume unit at
    every boot): check the kernel, measure, go back to the default kernel.

    Example: perfline resume
    """
    from perfline.runner.kexec_resume import abandon as abandon_boot

    store = open_store()
    if abandon:
        given_up = abandon_boot(store)
        console.print("no kexec boot of this machine is open" if given_up is None
                      else f"kexec boot {given_up.id} abandoned")
        return
    resumed = resume_here(store)
    if resumed.boot is not None and resumed.boot.series_id is not None:
        go_on(store, resumed.boot)
    if resumed.reboot:
        kexec.reboot()
    if resumed.outcome == "boot-failed":
        raise typer.Exit(EXIT_FAILED)


def go_on(store: Store, boot: KexecBoot, steps: BootSteps | None = None) -> None:
    """What `perfline resume` does after a boot of a series closed: an ab over boots,
    the next block's boot, or after the last, the comparison; a bisection's probe, the
    bisection carried on; a tracker's boot (a tested commit, its confirmation's last
    block, its bisection's probe), the tracker's pass. `steps`: how this machine boots
    (a test gives its own)."""
    from perfline.analysis.kexec_ab import comparison
    from perfline.report.comparison_table import comparison_view
    from perfline.runner import kexec_series
    from perfline.runner.kexec_resume import THIS_MACHINE

    series = store.kexec_series(boot.series_id or 0)
    if series.state != "open" or boot.state not in ("returned", "boot-failed"):
        return
    if boot.fleet_attempt is not None:
        # A fleet job's boot (a kernel tracker's confirmation or bisection): its machine's
        # worker carries the job on, after its health job on the default kernel.
        return
    if series.kind == "bisect":
        _go_on_with_bisection(store, series, steps)
        return
    if series.kind == "track":
        _carry_on_tracker(store, str(series.settings["tracker"]), steps)
        return
    said = kexec_series.go_on(store, boot, machine_settings.load(), steps or THIS_MACHINE)
    if said is None:
        return
    notify(said)
    series = store.kexec_series(series.id)
    if series.state in ("done", "failed") and (compared := comparison(store, series)) is not None:
        console.print(comparison_view(compared))
    if series.state != "open" and "tracker" in series.settings:  # a tracker's confirmation: judged by its pass
        _carry_on_tracker(store, str(series.settings["tracker"]), steps)


def _go_on_with_bisection(store: Store, series: KexecSeries, steps: BootSteps | None) -> None:
    """The bisection carried on: by its tracker's pass when it narrows a tracker's
    regression (which records the culprit), else on its own."""
    from perfline.bisect.kexec_probe import bisection_of, close_series
    from perfline.cli.bisect import carry_on
    from perfline.records.status import BisectionStatus

    record = store.bisection(bisection_of(series.settings))
    trackers = {r.tracker for r in store.regressions() if r.bisection_id == record.id and r.tracker}
    try:
        if trackers:
            _carry_on_tracker(store, trackers.pop(), steps)
        elif record.status == BisectionStatus.RUNNING:
            carry_on(store, record)
    finally:
        close_series(store, record.id)


def _carry_on_tracker(store: Store, name: str, steps: BootSteps | None) -> None:
    from perfline.cli.track import carry_on

    carry_on(store, name, steps)


def resume_here(store: Store, root: Path = Path("/")) -> Resumed:
    """All `perfline resume` does before it reboots: the boot checked, measured (or found
    `boot-failed`), said, and a worker's kernel job ended as it went. `root`: where /proc
    and /etc are read (a test of kernel jobs gives a tree of its own)."""
    from perfline.runner import execute
    from perfline.runner.kexec_resume import resume as resume_boot

    def measure(cases: list[Case], boot: KexecBoot) -> list[int]:
        with running(store, cases, boot.label, boot.kernel_commit, kexec_boot=boot) as ctx:
            return [execute(case, ctx).run_id for case in cases]

    resumed = resume_boot(store, measure, root=root)
    notify(resumed.message)
    if resumed.boot is not None and resumed.boot.console:
        notify(resumed.boot.console)
    if resumed.boot is not None and resumed.boot.fleet_attempt is not None:
        _end_fleet_job(store, resumed.boot)
    return resumed


def _end_fleet_job(store: Store, boot: KexecBoot) -> None:
    """A worker's kernel job: its attempt and job end as the boot went, before the
    machine goes back to its default kernel (where the worker starts again)."""
    from perfline.fleet.kernel_jobs import end_job
    from perfline.fleet.queue import FleetQueue
    from perfline.store import resolve_url

    with FleetQueue(resolve_url(state.db), outage_wait_s=600.0) as queue:
        done = end_job(store, queue, boot)
    if done is not None:
        notify(done)


def start_kexec(cases: list[Case], label: str | None, kernel_commit: str | None) -> None:
    """`run --target kexec`: the boot is written to the store, then the machine boots."""
    from perfline.runner.kexec_resume import start

    settings = machine_settings.load()
    kexec.require_boot_allowed(settings)  # before the store is opened
    boot = start(open_store(), cases, settings, label=label, kernel_commit=kernel_commit)
    say_booting(boot)


def say_booting(boot: KexecBoot) -> None:
    """The one line before the machine goes down: what boots, how, and what goes on after."""
    how = ""
    if boot.how == "reboot":
        how = (f" through GRUB's one-shot entry (kexec is refused here: {escape(kexec.refusal() or 'refused')}; "
               "the job allows `boot: reboot`)")
    errors.print(f"kexec boot {boot.id}: booting {escape(boot.kernel)} ({escape(boot.release)}){how} with "
                 f"[dim]{escape(boot.cmdline)}[/dim]; watchdog: {escape(boot.watchdog or 'not recorded')}; "
                 "`perfline resume` goes on after the boot (`perfline kernels boots` shows how it went)",
                 highlight=False, soft_wrap=True)


def start_kexec_ab(case_a: Case, case_b: Case, pairs: int, blocks: int, label: str | None,
                   kernel_commit: str | None, compare: dict[str, object]) -> None:
    """`ab --target kexec`: the plan written to the store, then the first block's boot."""
    from perfline.runner.kexec_series import block_sizes, plan_steps, start_ab

    settings = machine_settings.load()
    kexec.require_boot_allowed(settings)  # before the store is opened, as for `run`
    if not 1 <= blocks <= pairs:
        raise UserError(f"--blocks {blocks}: give 1 to --pairs ({pairs}) boots a side")
    series, boot = start_ab(open_store(), case_a, case_b, pairs, blocks, settings, label=label,
                            kernel_commit=kernel_commit, compare=compare)
    order = " ".join(str(step["side"]) for step in plan_steps(case_a, case_b, pairs, blocks))
    sizes = sorted(set(block_sizes(pairs, blocks)))
    errors.print(f"ab over kexec boots (series {series.id}): {blocks} block{'s' if blocks > 1 else ''} a side of "
                 f"{' or '.join(map(str, sizes))} repetitions, one boot each, in the order {order}; "
                 "`perfline resume` goes on after every boot, from the store, and compares after the last "
                 f"(`perfline kernels series {series.id}` shows how far it is)", highlight=False, soft_wrap=True)
    say_booting(boot)


def series(
    series_id: Annotated[int | None, typer.Argument(help="A series id; without it, the recent series.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """An ab over kexec boots: its blocks, how far it is, and its comparison so far.

    Example: perfline kernels series 3
    """
    from perfline.analysis.kexec_ab import comparison
    from perfline.report.comparison_table import comparison_json, comparison_view

    store = open_store()
    if series_id is None:
        listed = store.kexec_series_list()
        if as_json:
            print(json.dumps([vars(one) for one in listed], indent=2, default=str))
            return
        if not listed:
            console.print("no ab over kexec boots yet: `perfline ab JOB --target kexec --a kernel:NAME --b "
                          "kernel:NAME` starts one")
            return
        table = Table(title="kexec series", title_justify="left")
        for column in ("id", "kind", "machine", "blocks", "state", "error"):
            table.add_column(column)
        for one in listed:
            table.add_row(str(one.id), one.kind, one.machine_id[:12], str(len(one.steps)), one.state, one.error or "")
        console.print(table)
        return
    try:
        one = store.kexec_series(series_id)
    except LookupError as exc:
        raise UserError(f"{exc}: `perfline kernels series` lists them") from None
    boots_of = store.series_boots(one.id)
    compared = comparison(store, one)
    if as_json:
        print(json.dumps({**vars(one), "boots": [vars(boot) for boot in boots_of],
                          "comparison": None if compared is None else comparison_json(compared)},
                         indent=2, default=str))
        return
    table = Table(title=f"kexec series {one.id} ({one.kind}): {one.state}" + (f": {one.error}" if one.error else ""),
                  title_justify="left")
    for column in ("block", "side", "kernel", "boot", "state", "runs"):
        table.add_column(column)
    by_step = {boot.series_step: boot for boot in boots_of}
    for step, planned in enumerate(one.steps):
        boot = by_step.get(step)
        kernel = str(planned["case"]["boot_kernel"]) if isinstance(planned["case"], dict) else ""
        table.add_row(str(step + 1), str(planned["side"]), kernel, "" if boot is None else str(boot.id),
                      "to come" if boot is None else boot.state,
                      "" if boot is None else ", ".join(map(str, boot.run_ids)))
    console.print(table)
    if compared is not None:
        console.print(comparison_view(compared))


def require_opt_in() -> None:
    kexec.require_opt_in(machine_settings.load())

