"""`perfline worker` and `perfline fleet`: test machines on a PostgreSQL job queue."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from perfline.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, console, errors, fail, notify, open_store, state
from perfline.cli.help_style import App

if TYPE_CHECKING:
    from perfline.fleet.queue import FleetQueue
    from perfline.store import Store

fleet_app = App(help="Many test machines on the store's PostgreSQL: submit jobs, watch, drain.\n\n"
                     "Example: perfline fleet status")

MachineName = Annotated[str, typer.Argument(help="The machine's name, as its worker gave it.")]
StalledOption = Annotated[
    float | None,
    typer.Option("--stalled", metavar="SECONDS",
                 help="Silence after which a machine's job is queued again [$PERFLINE_FLEET_STALLED_S, 120].")]


def _open() -> tuple[Store, FleetQueue]:
    # Imported here: procrastinate is needed by fleet commands only, SQLAlchemy when the
    # store is opened (cli.common.open_store).
    from perfline.fleet.queue import FleetQueue
    from perfline.store import resolve_url

    store = open_store()
    return store, FleetQueue(resolve_url(state.db))


def worker(
    machine: Annotated[str, typer.Option("--machine", help="This machine's name in the fleet.")],
    machine_class: Annotated[
        str | None,
        typer.Option("--class", help="Machines whose numbers compare; default: from the CPU model and count."),
    ] = None,
    db: Annotated[str | None, typer.Option("--db", help="The team store (postgresql+psycopg://...).")] = None,
    stalled: StalledOption = None,
    health_every: Annotated[int, typer.Option(min=1, help="Run the health job every N jobs.")] = 50,
    outage_wait: Annotated[
        float, typer.Option(metavar="SECONDS", help="How long to wait for a database that went away.")] = 600.0,
    images: Annotated[
        Path | None,
        typer.Option(help="The fleet's shared directory of built kernels (kernel trackers) [$PERFLINE_FLEET_IMAGES]."),
    ] = None,
) -> None:
    """Serve as a test machine: take the fleet's jobs one at a time, with heartbeats.

    SIGTERM or Ctrl-C interrupts the running job (its run is marked interrupted and the
    job goes back to the queue) and stops; `fleet drain` stops it after its job.

    Example: perfline worker --machine lab-3 --class xeon-8
    """
    from perfline.fleet.kernel_jobs import images_dir
    from perfline.fleet.machine import describe
    from perfline.fleet.queue import FleetQueue
    from perfline.fleet.stalled import stalled_timeout
    from perfline.fleet.worker import FleetWorker, WorkerSettings
    from perfline.runner import terminate_as_interrupt
    from perfline.store import resolve_url

    url = resolve_url(db or state.db)
    settings = WorkerSettings(stalled_s=stalled or stalled_timeout(), health_every=health_every, outage_wait_s=outage_wait)
    store = open_store(url, outage_wait)
    with FleetQueue(url, outage_wait_s=outage_wait) as queue, terminate_as_interrupt():
        serving = FleetWorker(store, queue, describe(machine, machine_class), settings, notify,
                              images=images or images_dir())
        try:
            why = serving.serve()
        except KeyboardInterrupt:
            notify(f"worker {machine}: stopped")
            raise typer.Exit(EXIT_INTERRUPTED) from None
    notify(why)


@fleet_app.command()
def submit(
    what: Annotated[str, typer.Argument(help="A job file (YAML) or a benchmark name.")],
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="KEY=VALUE, for a benchmark.")] = None,
    machine_class: Annotated[str | None, typer.Option("--class", help="Any machine of this class.")] = None,
    machine: Annotated[str | None, typer.Option("--machine", help="This machine only.")] = None,
    each_machine: Annotated[bool, typer.Option("--each-machine", help="Every machine of the class.")] = False,
    label: Annotated[str | None, typer.Option(help="Label stored with the runs.")] = None,
    kernel_commit: Annotated[str | None, typer.Option(help="Commit of the kernel under test.")] = None,
    priority: Annotated[int, typer.Option(help="Higher runs first.")] = 0,
    repeat: Annotated[str | None, typer.Option(help="Measured repetitions, or 'auto'.")] = None,
    warmup: Annotated[int | None, typer.Option(min=0, help="Unstored warm-up runs.")] = None,
    monitor: Annotated[list[str] | None, typer.Option("--monitor", "-m", help="Monitor beside it.")] = None,
    no_monitors: Annotated[bool, typer.Option("--no-monitors", help="Run no monitors.")] = False,
    sysctl: Annotated[list[str] | None, typer.Option("--sysctl", metavar="NAME=VALUE")] = None,
    sysfs: Annotated[list[str] | None, typer.Option("--sysfs", metavar="/sys/PATH=VALUE")] = None,
    governor: Annotated[str | None, typer.Option(help="cpufreq governor for the run.")] = None,
    pin: Annotated[str | None, typer.Option(metavar="CPULIST", help="Pin the benchmark to CPUs.")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the jobs and print their results.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Queue one job per case of a job file or benchmark; prints the job ids.

    Tunables are applied on the machine that runs the job, so they are checked there.

    Example: perfline fleet submit examples/jobs/tbench.yaml --class xeon-8 --wait
    """
    from perfline.fleet import submitting
    from perfline.jobs import expand  # not above: the job parser (yaml) is slow to import
    from perfline.jobs.command_line import CommandLineJob, build_job
    from perfline.report.runs import results_table

    if machine and (machine_class or each_machine):
        raise fail("--machine names one machine; give it without --class or --each-machine")
    request = CommandLineJob(what, param or [], monitor, no_monitors, repeat, None, None, warmup,
                             sysctl or [], sysfs or [], governor, pin, None)
    job, _given = build_job(request)
    cases = expand(job)
    store, queue = _open()
    with queue:
        submitted = submitting.submit(queue, store, cases, submitting.Placement(machine_class, machine, each_machine),
                                 label=label, kernel_commit=kernel_commit, priority=priority)
        if not wait:
            if as_json:
                print(json.dumps([{"id": s.job_id, "queue": s.queue, "case": s.case.key} for s in submitted]))
            else:
                for s in submitted:
                    console.print(f"job {s.job_id}: {s.case.benchmark} {s.case.key} -> {s.queue}", highlight=False)
            return
        ids = [s.job_id for s in submitted]
        states = submitting.wait(queue, ids)
    runs = {a.job_id: a.run_id for a in store.attempts(ids) if a.state == "succeeded" and a.run_id is not None}
    details = [store.get_run(runs[i]) for i in ids if i in runs]
    if as_json:
        from perfline.report.runs import run_detail_json

        print(json.dumps({"jobs": [{"id": i, "state": states[i], "run": runs.get(i)} for i in ids],
                          "runs": [run_detail_json(d) for d in details]}, indent=2))
    elif details:
        console.print(results_table(details))
    unfinished = [f"job {i} {states[i]}" for i in ids if i not in runs]
    if unfinished:
        errors.print("[red]not done:[/red] " + ", ".join(unfinished))
        raise typer.Exit(EXIT_FAILED)


@fleet_app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    stalled: StalledOption = None,
) -> None:
    """Machines (idle, busy, offline, bad) and jobs per class; silent machines' jobs are
    queued again first.

    Example: perfline fleet status
    """
    from perfline.fleet.stalled import stalled_timeout
    from perfline.fleet.status import fleet_status, status_tables

    store, queue = _open()
    with queue:
        found = fleet_status(store, queue, stalled or stalled_timeout())
    if as_json:
        print(json.dumps(found.to_json(), indent=2))
        return
    for table in status_tables(found):
        console.print(table)


@fleet_app.command()
def cancel(job_id: Annotated[int, typer.Argument(help="The job id `fleet submit` printed.")]) -> None:
    """Cancel a queued job; a running one stops after its current repetition.

    Example: perfline fleet cancel 42
    """
    _store, queue = _open()
    with queue:
        if not queue.jobs(job_id):
            raise fail(f"no fleet job {job_id}; `perfline fleet status` lists them")
        if not queue.cancel(job_id):
            raise fail(f"job {job_id} has ended already; nothing to cancel")
    notify(f"job {job_id}: cancelled")


@fleet_app.command()
def drain(name: MachineName) -> None:
    """Let the machine finish its current job and take no more (its worker stops).

    Example: perfline fleet drain lab-3
    """
    _hold(name, "drain", "drained by `perfline fleet drain`")


@fleet_app.command()
def retire(name: MachineName) -> None:
    """Take the machine out of the fleet: its worker stops; `fleet status` no longer lists it.

    Example: perfline fleet retire lab-3
    """
    _hold(name, "retired", "retired by `perfline fleet retire`")


@fleet_app.command()
def enable(name: MachineName) -> None:
    """Let a drained, bad or retired machine take jobs again (its worker then starts).

    Example: perfline fleet enable lab-3
    """
    _hold(name, None, None)


def _hold(name: str, hold: str | None, reason: str | None) -> None:
    store = open_store()
    machine = store.set_hold(name, hold, reason)
    notify(f"machine {name}: {hold or 'takes jobs'}" + (" (running a job: it finishes it first)"
                                                        if hold and machine.job_id else ""))


@fleet_app.command("install-worker")
def install_worker(
    machine: Annotated[str, typer.Option("--machine", help="This machine's name in the fleet.")],
    machine_class: Annotated[str | None, typer.Option("--class", help="Its class (default: derived).")] = None,
    directory: Annotated[Path, typer.Option("--dir", help="Where to write the unit file.")] = Path(
        "/etc/systemd/system"),
    images: Annotated[Path | None, typer.Option(help="The fleet's shared directory of built kernels.")] = None,
) -> None:
    """Write a systemd service that runs `perfline worker` on this machine.

    Example: perfline fleet install-worker --machine lab-3 --class xeon-8
    """
    from perfline.fleet.queue import conninfo
    from perfline.store import resolve_url

    url = resolve_url(state.db)
    conninfo(url)  # a store that is not PostgreSQL cannot hold the queue: say so now
    directory.mkdir(parents=True, exist_ok=True)
    perfline = shlex.quote(str(Path(sys.argv[0]).resolve()))
    extra = f" --class {shlex.quote(machine_class)}" if machine_class else ""
    if images is not None:
        extra += f" --images {shlex.quote(str(images.resolve()))}"
    unit = directory / f"perfline-worker-{machine}.service"
    unit.write_text(WORKER_SERVICE.format(machine=machine, db=url, perfline=perfline,
                                          name=shlex.quote(machine), extra=extra))
    console.print(f"wrote {unit}; start with: systemctl daemon-reload && systemctl enable --now {unit.name}",
                  highlight=False)


# SIGTERM (systemctl stop) interrupts the job and queues it again; a drained machine's
# worker exits 0 and stays down (Restart=on-failure), a crash is restarted. After
# perfline-resume.service: a kexec boot for a kernel job is resumed (and the machine
# sent back to its default kernel) before the worker takes another job.
WORKER_SERVICE = """[Unit]
Description=perfline fleet worker {machine}
After=network-online.target perfline-resume.service
Wants=network-online.target

[Service]
Type=simple
Environment=PERFLINE_DB={db}
ExecStart={perfline} worker --machine {name}{extra}
KillSignal=SIGTERM
TimeoutStopSec=120
Restart=on-failure
RestartSec=10

[Install]
WantedBy=multi-user.target
"""
