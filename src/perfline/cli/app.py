"""The `perfline` command: thin wrappers that call the packages and print their results."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from perfline import __version__
from perfline.analysis.comparison import (
    DEFAULT_ALPHA,
    DEFAULT_CONFIDENCE,
    DEFAULT_FLOOR_PCT,
    CaseComparison,
    Side,
    compare_sides,
    sides_by_kernel,
    sides_by_label,
    sides_from_runs,
)
from perfline.cli.bisect import bisect_app
from perfline.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    console,
    fail,
    open_store,
    restore_crashed_changes,
    running,
    state,
)
from perfline.cli.doctor import doctor
from perfline.cli.fleet import fleet_app, worker
from perfline.cli.help_style import COMPARE, FLEET, INTEROP, KERNELS, MACHINE, MEASURE, TRACK, App
from perfline.cli.history import detect, history, regressions_app
from perfline.cli.interop import export, import_
from perfline.cli.kernels import kernels_app
from perfline.cli.kexec import DEFAULT_BLOCKS, resume, start_kexec, start_kexec_ab
from perfline.cli.kexec import require_opt_in as require_kexec_opt_in
from perfline.cli.migration import migration_cost
from perfline.cli.report import report_app
from perfline.cli.serve import serve
from perfline.cli.track import track_app
from perfline.cli.tune import tune
from perfline.records.job import COMMAND_LINE, ParamValue
from perfline.records.metric import Direction, Metric
from perfline.records.status import RunStatus
from perfline.report.comparison_table import comparison_json, comparison_view
from perfline.report.runs import (
    results_table,
    run_detail_json,
    run_info_json,
    run_view,
    runs_table,
)
from perfline.stats.sequential import DEFAULT_MAX_PAIRS, FIRST_LOOK, SequentialPlan
from perfline.system.journal import journal_files, state_dir, this_boot

if TYPE_CHECKING:
    from perfline.runner import RunOutcome
    from perfline.store import Store

# The commands that run benchmarks import the runner, the job parser and the registries
# of benchmarks and monitors inside: with the other command modules' such imports, 0.08 s
# of CPU that the commands which only read the store (compare, history, show) no longer
# pay at start-up.

app = App(help="perfline: run kernel benchmarks, store every sample, find what changed.\n\n"
               "Example: perfline run sched-pipe --repeat 10")


@app.callback()
def main_options(
    db: Annotated[
        str | None,
        typer.Option(help="Store: an SQLAlchemy URL or an SQLite file (default $PERFLINE_DB)."),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="Print the traceback of an internal error instead of writing it to a file.")
    ] = False,
) -> None:
    state.db = db
    restore_crashed_changes()


# The qemu target's options, the same for `run` and `ab`.
KernelOption = Annotated[str | None, typer.Option(help="qemu, kexec: a kernel from `perfline kernels list`.")]
CmdlineOption = Annotated[str | None, typer.Option(help="qemu, kexec: extra kernel parameters.")]
BootOption = Annotated[str | None, typer.Option(
    help="kexec: `reboot` boots through GRUB's one-shot entry where kexec is refused (default: kexec only).")]
WatchdogOption = Annotated[str | None, typer.Option(
    metavar="SECONDS|off", help="kexec: reset the machine when the tested kernel hangs, as the job's `watchdog:` "
                                "(docs/kexec.md).")]
VmCpusOption = Annotated[int | None, typer.Option(help="qemu: virtual CPUs (default 2).")]
VmMemoryOption = Annotated[int | None, typer.Option(help="qemu: memory in MiB (default 1024).")]
AccelOption = Annotated[str | None, typer.Option(help="qemu: auto, kvm or tcg (default auto).")]
TuneOption = Annotated[bool, typer.Option("--tune", help="Tune the machine around the run and reset it after "
                                                         "(perfline tune; the benchmark CPUs: --pin, else isolcpus).")]


def restore() -> None:
    """Put back what a crashed or killed perfline run left changed (tunables, tracefs).

    Example: perfline restore
    """
    # The callback has already restored what it could; this command says what is left.
    from perfline.system.tuning import kept_entries

    if kept := kept_entries(state_dir(), this_boot()):
        console.print(f"{len(kept)} change(s) of `perfline tune` are kept on purpose: perfline tune --reset "
                      "undoes them")
    remaining = journal_files(state_dir())
    if not remaining:
        console.print("nothing to restore: no crashed perfline run left the kernel changed")
        return
    console.print(
        f"{len(remaining)} journal(s) remain, of running perfline processes (they restore "
        "their own) or with values that could not be written back: "
        + ", ".join(str(p) for p in remaining)
    )


def list_catalogue(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Benchmarks and monitors, one line each, with what they measure.

    Example: perfline list --json
    """
    from perfline.benchmarks import BENCHMARKS
    from perfline.monitors import MONITORS

    if as_json:
        print(json.dumps({
            title: [{"name": entry.name, "summary": entry.summary, "from": registry.origin(entry.name),
                     "metrics": [{"name": m.name, "unit": m.unit, "direction": m.direction.value}
                                 for m in entry.metrics]}
                    for entry in registry.all()]
            for title, registry in (("benchmarks", BENCHMARKS), ("monitors", MONITORS))
        }, indent=2))
        return
    for title, registry in (("benchmarks", BENCHMARKS), ("monitors", MONITORS)):
        table = Table(title=title, title_justify="left", show_lines=False)
        table.add_column("name", style="cyan", no_wrap=True)
        table.add_column("what it measures")
        table.add_column("metrics (unit, better)", style="dim")
        table.add_column("from", style="dim")
        for entry in registry.all():
            metrics = ", ".join(f"{m.name} ({m.unit or '-'}, {m.direction})" for m in entry.metrics)
            table.add_row(entry.name, entry.summary, metrics, registry.origin(entry.name))
        console.print(table)
        for problem in registry.problems():
            console.print(f"[yellow]warning:[/] {problem}")


def run(
    what: Annotated[str, typer.Argument(help="A job file (YAML) or a benchmark name.")],
    repeat: Annotated[
        str | None,
        typer.Option(help="Measured repetitions, or 'auto': until the CI is within --precision."),
    ] = None,
    precision: Annotated[
        str | None, typer.Option(help="With --repeat auto: CI half-width of the mean, e.g. 1%.")
    ] = None,
    max_repeat: Annotated[
        int | None, typer.Option(help="With --repeat auto: stop after this many runs.")
    ] = None,
    warmup: Annotated[int | None, typer.Option(min=0, help="Unstored warm-up runs.")] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="KEY=VALUE, for a benchmark name.")
    ] = None,
    monitor: Annotated[
        list[str] | None, typer.Option("--monitor", "-m", help="Monitor to run beside it.")
    ] = None,
    no_monitors: Annotated[bool, typer.Option("--no-monitors", help="Run no monitors.")] = False,
    sysctl: Annotated[
        list[str] | None,
        typer.Option("--sysctl", metavar="NAME=VALUE", help="Set a sysctl for the run (repeat it).")
    ] = None,
    sysfs: Annotated[
        list[str] | None,
        typer.Option("--sysfs", metavar="/sys/PATH=VALUE", help="Set a sysfs knob for the run (repeat it).")
    ] = None,
    governor: Annotated[
        str | None, typer.Option(help="cpufreq governor of every CPU for the run.")
    ] = None,
    pin: Annotated[
        str | None, typer.Option(metavar="CPULIST", help="Pin the benchmark to CPUs, e.g. 0-1.")
    ] = None,
    load: Annotated[
        str | None, typer.Option(metavar="N", help="N CPU hogs beside each repetition.")
    ] = None,
    label: Annotated[str | None, typer.Option(help="Label stored with the run, e.g. v6.7.")] = None,
    kernel_commit: Annotated[
        str | None, typer.Option(help="Commit of the kernel under test.")
    ] = None,
    target: Annotated[
        str | None, typer.Option(help="local; qemu: boot --kernel in a VM; kexec: boot this machine into it.")
    ] = None,
    kernel: KernelOption = None,
    cmdline: CmdlineOption = None,
    boot: BootOption = None,
    watchdog: WatchdogOption = None,
    vm_cpus: VmCpusOption = None,
    vm_memory: VmMemoryOption = None,
    accel: AccelOption = None,
    tune: TuneOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
) -> None:
    """Run a job file or a single benchmark; every sample is stored as it is taken.

    --sysctl, --sysfs, --governor, --pin and --load set tunables as a job file's
    `tunables:` and `load:` do, replacing the job's own value of the same knob.

    Example: perfline run sched-pipe -p loops=20000 --repeat 10 --label v6.7
    """
    from perfline.jobs import expand
    from perfline.jobs.command_line import CommandLineJob, Target, build_job
    from perfline.runner import execute

    if target == "kexec":
        require_kexec_opt_in()  # first: without it, one line and nothing else happens
    request = CommandLineJob(what, param or [], monitor, no_monitors, repeat, precision, max_repeat, warmup,
                             sysctl or [], sysfs or [], governor, pin, load,
                             Target(target, kernel, cmdline, vm_cpus, vm_memory, accel, boot, watchdog), tune)
    job, given = build_job(request)
    cases = expand(job)
    if job.target == "kexec":
        start_kexec(cases, label, kernel_commit)
        return
    if job.target == "local":
        _check_knobs(given)
    store = open_store()
    outcomes: list[RunOutcome] = []
    with running(store, cases, label, kernel_commit) as ctx:
        for case in cases:
            outcomes.append(execute(case, ctx))
    details = [store.get_run(o.run_id) for o in outcomes]
    if as_json:
        print(json.dumps([run_detail_json(d) for d in details], indent=2))
    else:
        console.print(results_table(details))
        console.print(f"[dim]samples, monitors and fingerprint: perfline show {details[-1].info.id}[/dim]")
    if any(o.status != RunStatus.COMPLETED for o in outcomes):
        raise typer.Exit(EXIT_FAILED)


def _check_knobs(given: dict[str, dict[str, ParamValue]]) -> None:
    """Knobs named on the command line exist here, before anything runs (a job file's
    that do not fail their run instead)."""
    from perfline.tunables import TunableError, check_available

    for kind, values in given.items():
        for key, value in values.items():
            try:
                check_available({kind: {key: value}})
            except TunableError as exc:
                raise fail(f"{COMMAND_LINE}: --{kind}: {exc}") from None


def runs(
    limit: Annotated[int, typer.Option(min=1, help="How many runs to list.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Recent runs, newest first.

    Example: perfline runs --limit 20
    """
    from perfline.store import resolve_url  # SQLAlchemy: when the store is opened (cli.common.open_store)

    listed = open_store().list_runs(limit)
    if as_json:
        print(json.dumps([run_info_json(r) for r in listed], indent=2))
    elif not listed:
        console.print(f"no runs yet in {resolve_url(state.db)}; try `perfline run sched-pipe`")
    else:
        console.print(runs_table(listed))


def show(
    run_id: Annotated[int, typer.Argument(help="Run id, from `perfline runs`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """One run: samples, summary, monitors and fingerprint.

    Example: perfline show 12
    """
    from perfline.store import RunNotFound  # SQLAlchemy: when the store is opened

    try:
        detail = open_store().get_run(run_id)
    except RunNotFound as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(json.dumps(run_detail_json(detail), indent=2))
    else:
        console.print(run_view(detail))


AlphaOption = Annotated[
    float, typer.Option(min=1e-6, max=0.5, help="Significance level of the test.")
]
FloorOption = Annotated[
    float, typer.Option(min=0.0, help="Practical floor in %: smaller changes are never significant.")
]
MetricFloorOption = Annotated[
    list[str] | None,
    typer.Option("--metric-floor", help="METRIC=PCT: a floor for one metric, e.g. tbench.throughput=2."),
]


def compare(
    what: Annotated[
        list[str] | None,
        typer.Argument(help="Runs to compare (ids), or with --csv CSV files; the first is the baseline."),
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="Compare all runs with these labels, per case (repeat it)."),
    ] = None,
    kernel: Annotated[
        list[str] | None,
        typer.Option("--kernel", help="Compare all runs whose VM booted these registered kernels, "
                     "per case (repeat it)."),
    ] = None,
    alpha: AlphaOption = DEFAULT_ALPHA,
    floor: FloorOption = DEFAULT_FLOOR_PCT,
    metric_floor: MetricFloorOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    csv_files: Annotated[bool, typer.Option(
        "--csv", help="The arguments are CSV files, one side each; a `run` column groups rows into runs.")] = False,
    column: Annotated[list[str] | None, typer.Option(
        help="With --csv: the column to compare (repeat it; default every numeric column).")] = None,
    direction: Annotated[str, typer.Option(help="With --csv: lower or higher is better.")] = "lower",
    primary: Annotated[list[str] | None, typer.Option(
        help="With --csv: the headline column, tested at α (repeat it); the other columns are one family "
             "(Benjamini–Hochberg at α/2). Without it every column is in the family.")] = None,
) -> None:
    """Compare runs: %change with its confidence interval, significance, and what differs.

    Example: perfline compare --label v6.6 --label v6.7
    """
    from perfline.store import RunNotFound  # SQLAlchemy: when the store is opened

    if csv_files:
        if label or kernel:
            raise fail("--csv compares files: give them as arguments, without --label or --kernel")
        if direction not in ("lower", "higher"):
            raise fail(f"--direction {direction}: give lower or higher")
        from perfline.analysis.csv_sides import compare_csv

        compared = compare_csv([Path(p) for p in what or []], column, Direction(direction), alpha=alpha,
                               floor_pct=floor, primary=primary)
        _print_comparisons([compared], as_json, alpha)
        return
    if column or primary:
        raise fail(f"{'--column' if column else '--primary'} goes with --csv")
    run_ids = _run_ids(what or [])
    if [bool(run_ids), bool(label), bool(kernel)].count(True) != 1:
        raise fail("give run ids (perfline compare 12 15), or --label twice or more, or --kernel twice or more")
    store = open_store()
    if run_ids:
        if len(run_ids) < 2:
            raise fail("compare needs at least two runs: the baseline and one other")
        try:
            groups = [sides_from_runs(store, run_ids)]
        except RunNotFound as exc:
            raise fail(str(exc)) from None
    else:
        groups = _grouped_sides(store, label, kernel)
    floors = _metric_floors(metric_floor or [])
    comparisons = [
        compare_sides(sides, store, alpha=alpha, floor_pct=floor, metric_floors=floors)
        for sides in groups
    ]
    _print_comparisons(comparisons, as_json, alpha)


def _run_ids(items: list[str]) -> list[int]:
    ids = []
    for item in items:
        if not item.isdigit():
            hint = "; to compare CSV files add --csv" if item.endswith(".csv") else ""
            raise fail(f"{item!r} is not a run id{hint}")
        ids.append(int(item))
    return ids


def _grouped_sides(store: Store, labels: list[str] | None, kernels: list[str] | None) -> list[list[Side]]:
    """Per case, one side per --label or per --kernel, the first the baseline."""
    by, names, sides_by = ("label", labels, sides_by_label) if labels else ("kernel", kernels, sides_by_kernel)
    assert names is not None
    if len(names) < 2:
        raise fail(f"compare needs at least two --{by} options")
    if by == "kernel":
        booted = store.vm_kernels()
        for name in names:
            if name not in booted:
                known = (f"kernels with runs: {', '.join(booted)}" if booted
                         else "no run has booted a kernel yet (perfline run --target qemu --kernel NAME)")
                raise fail(f"no run booted kernel {name!r}; {known}")
    groups = sides_by(store, names)
    if not groups:
        raise fail(f"no case has runs with samples under every {by} {', '.join(names)}")
    return groups


def _metric_floors(items: list[str]) -> dict[str, float]:
    floors = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            floors[name.strip()] = float(value.strip().removesuffix("%"))
        except ValueError:
            sep = ""
        if not sep:
            raise fail(f"--metric-floor {item!r}: expected METRIC=PCT, e.g. tbench.throughput=2")
    return floors


def _print_comparisons(comparisons: list[CaseComparison], as_json: bool, alpha: float) -> None:
    """`alpha`: the one asked for, shown when there is no comparison to say its own."""
    if as_json:
        alpha = comparisons[0].alpha if comparisons else alpha
        print(json.dumps({"alpha": alpha, "cases": [comparison_json(c) for c in comparisons]}, indent=2))
        return
    for comparison in comparisons:
        console.print(comparison_view(comparison))


def ab(
    what: Annotated[str, typer.Argument(help="A job file (one case) or a benchmark name.")],
    a: Annotated[
        list[str], typer.Option("--a", help="Side A override KIND:KEY=VALUE or kernel:NAME (repeat it).")
    ],
    b: Annotated[
        list[str], typer.Option("--b", help="Side B override KIND:KEY=VALUE or kernel:NAME (repeat it).")
    ],
    pairs: Annotated[
        str, typer.Option(help="A/B pairs to measure, or auto: until the answer is decided (at most --max-pairs).")
    ] = "10",
    max_pairs: Annotated[
        int, typer.Option(min=FIRST_LOOK, help="With --pairs auto: the most pairs to measure.")
    ] = DEFAULT_MAX_PAIRS,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="KEY=VALUE for both sides.")
    ] = None,
    warmup: Annotated[int | None, typer.Option(min=0, help="Warm-up runs per side.")] = None,
    monitor: Annotated[
        list[str] | None, typer.Option("--monitor", "-m", help="Monitor to run beside it.")
    ] = None,
    no_monitors: Annotated[bool, typer.Option("--no-monitors", help="Run no monitors.")] = False,
    label: Annotated[str | None, typer.Option(help="Label stored with both runs.")] = None,
    kernel_commit: Annotated[str | None, typer.Option(help="Commit of the kernel.")] = None,
    target: Annotated[
        str | None, typer.Option(help="local; qemu: boot --kernel or each side's kernel:NAME in a VM; kexec: "
                                 "boot this machine into each side's kernel, one boot per block.")
    ] = None,
    blocks: Annotated[int, typer.Option(
        help="kexec: boots a side; the pairs are split over them, and the blocks interleaved.")] = DEFAULT_BLOCKS,
    kernel: KernelOption = None,
    cmdline: CmdlineOption = None,
    boot: BootOption = None,
    watchdog: WatchdogOption = None,
    vm_cpus: VmCpusOption = None,
    vm_memory: VmMemoryOption = None,
    accel: AccelOption = None,
    alpha: AlphaOption = DEFAULT_ALPHA,
    floor: FloorOption = DEFAULT_FLOOR_PCT,
    metric_floor: MetricFloorOption = None,
    tune: TuneOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Interleaved A/B: run two configurations alternately (A B A B …) and compare them.

    Example: perfline ab sched-pipe --a param:cpus=0 --b param:cpus=0,1 --pairs auto
    """
    from perfline.jobs.command_line import CommandLineJob, Target, build_ab
    from perfline.runner import execute_interleaved

    if target == "kexec":
        require_kexec_opt_in()
    request = CommandLineJob(what, param or [], monitor, no_monitors, warmup=warmup,
                             target=Target(target, kernel, cmdline, vm_cpus, vm_memory, accel, boot, watchdog),
                             tune=tune)
    plan = _sequential_plan(pairs, max_pairs, alpha)
    most = plan.looks[-1] if plan else int(pairs)
    case_a, case_b = build_ab(request, a, b, most)
    floors = _metric_floors(metric_floor or [])
    if target == "kexec" or case_a.target == "kexec":
        if plan:
            raise fail("--pairs auto with target kexec: give a number of pairs (each block is a boot)")
        start_kexec_ab(case_a, case_b, most, blocks, label, kernel_commit,
                       {"alpha": alpha, "floor": floor, "metric_floors": floors})
        return

    def decided(metric: Metric, base: list[float], other: list[float]) -> bool:
        assert plan is not None
        return plan.done(base, other, metric, floors.get(metric.name, floor))

    store = open_store()
    with running(store, [case_a, case_b], label, kernel_commit) as ctx:
        outcomes = execute_interleaved(case_a, case_b, most, ctx, decided if plan else None)
    if len(outcomes) < 2 or any(o.repetitions == 0 for o in outcomes):
        raise fail(
            "nothing to compare: " + "; ".join(f"run {o.run_id} {o.status}: {o.error}" for o in outcomes),
            EXIT_FAILED,
        )
    run_sides = [
        Side(f"{name} (run {o.run_id})", [store.get_run(o.run_id)])
        for name, o in zip(("A", "B"), outcomes, strict=True)
    ]
    pairs_taken = min(o.repetitions for o in outcomes)
    comparison = compare_sides(
        run_sides,
        store,
        alpha=plan.alpha_at(pairs_taken) if plan else alpha,
        confidence=plan.confidence_at(pairs_taken) if plan else DEFAULT_CONFIDENCE,
        floor_pct=floor,
        metric_floors=floors,
        paired=True,
    )
    if plan:
        comparison = replace(comparison, notes=[*comparison.notes, plan.note(pairs_taken)])
    _print_comparisons([comparison], as_json, alpha)
    if any(o.status != RunStatus.COMPLETED for o in outcomes):
        raise typer.Exit(EXIT_FAILED)


def _sequential_plan(pairs: str, max_pairs: int, alpha: float) -> SequentialPlan | None:
    """None for a fixed number of pairs; the looks of --pairs auto otherwise."""
    if pairs == "auto":
        return SequentialPlan.up_to(max_pairs, alpha)
    if not pairs.isdigit() or int(pairs) < 2:
        raise fail(f"--pairs {pairs!r}: give a number of pairs (2 or more) or auto", EXIT_USAGE)
    return None


def version() -> None:
    """Print the version.

    Example: perfline version
    """
    print(__version__)


# The commands in their panels, in the order `perfline --help` lists them.
for function, name, panel in (
    (run, "run", MEASURE),
    (ab, "ab", MEASURE),
    (list_catalogue, "list", MEASURE),
    (migration_cost, "migration-cost", MEASURE),
    (compare, "compare", COMPARE),
    (runs, "runs", COMPARE),
    (show, "show", COMPARE),
    (history, "history", COMPARE),
    (detect, "detect", TRACK),
    (serve, "serve", TRACK),
    (import_, "import", INTEROP),
    (export, "export", INTEROP),
    (worker, "worker", FLEET),
    (resume, "resume", KERNELS),
    (doctor, "doctor", MACHINE),
    (tune, "tune", MACHINE),
    (restore, "restore", MACHINE),
    (version, "version", MACHINE),
):
    app.command(name, rich_help_panel=panel)(function)
for group, name, panel in (
    (track_app, "track", TRACK),
    (report_app, "report", TRACK),
    (regressions_app, "regressions", TRACK),
    (bisect_app, "bisect", TRACK),
    (kernels_app, "kernels", KERNELS),
    (fleet_app, "fleet", FLEET),
):
    app.add_typer(group, name=name, rich_help_panel=panel)
