"""`perfline track`: follow a branch, test its commits, narrow each regression to its commit."""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from perfline.cli.bisect import PaceOption, _pace_tolerance
from perfline.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, console, errors, fail, notify, open_store, state
from perfline.cli.help_style import App
from perfline.targets import local

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from perfline.records.job import Case
    from perfline.records.metric import Measurement
    from perfline.report.tracking import TrackerState
    from perfline.runner import RunOutcome
    from perfline.runner.kexec_resume import BootSteps
    from perfline.store import Store
    from perfline.track.tracker_file import TrackerSpec

track_app = App(help="Follow a branch: test new commits, find changes, bisect each to its commit.\n\n"
                     "Example: perfline track run --once examples/track/demo.yaml")

TrackerFile = Annotated[Path, typer.Argument(help="The tracker file (YAML; see docs/track.md).")]


class _Observer:
    """The runner's and the bisection's progress on one Rich bar: the run in progress."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task = progress.add_task("", total=None, last="")
        self.bisecting: TaskID | None = None

    def run_started(self, run_id: int, case: Case) -> None:
        self.progress.update(self.task, description=f"run {run_id} {case.benchmark} {case.key}",
                             total=case.warmup + case.repeat, completed=0, last="")

    def warning(self, message: str) -> None:
        self.progress.console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False,
                                    soft_wrap=True)

    def step_started(self, run_id: int, repetition: int | None) -> None:
        pass

    def step_done(self, run_id: int, repetition: int | None, values: list[Measurement]) -> None:
        last = f"{values[0].metric.name}={values[0].value:.4g}" if values else ""
        self.progress.update(self.task, advance=1, last=last)

    def run_finished(self, outcome: RunOutcome) -> None:
        pass

    def bisect(self, event: str, runs: int, top: float) -> None:
        if self.bisecting is None:
            self.bisecting = self.progress.add_task("bisect", total=None, last="")
        self.progress.update(self.bisecting, description=f"bisect P(top)={top:.3f}", completed=runs, last=event)


@contextmanager
def _progress() -> Iterator[_Observer]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[last]}"), TimeElapsedColumn(), console=errors)
    with progress:
        yield _Observer(progress)


def _load(path: Path) -> TrackerSpec:
    from perfline.track.tracker_file import load_tracker

    return load_tracker(path)


@track_app.command("run")
def run(
    file: TrackerFile,
    once: Annotated[bool, typer.Option("--once", help="Do what is pending, then exit (for cron or a timer).")] = False,
    interval: Annotated[float, typer.Option(min=1, help="Without --once: minutes between passes.")] = 10.0,
    pace_tolerance: PaceOption = "10%",
) -> None:
    """Test the commits the tracker selects, judge them, and narrow what changed.

    Example: perfline track run --once examples/track/demo.yaml
    """
    from perfline.track.repository import check

    spec = _load(file)
    tolerance = _pace_tolerance(pace_tolerance)
    _require_kexec_allowed(spec)  # before the tree is fetched or the store opened
    with _one_pass_at_a_time(spec):
        check(spec, notify)
        store = open_store()
        _passes(store, spec, file, once, interval, tolerance)


@contextmanager
def _one_pass_at_a_time(spec: TrackerSpec) -> Iterator[None]:
    """Only one `track run` of a tracker on this machine at a time (a cron pass that
    starts while the last one still runs): two would test the same pending commits and
    bisect the same record, and each one's runs would disturb the other's. The later one
    does nothing and exits 1, saying who holds the tracker."""
    from perfline.system.files import Held, held_alone
    from perfline.targets.kernels import cache_dir

    try:
        with held_alone(cache_dir() / "track" / spec.name / "pass.lock"):
            yield
    except Held as held:
        raise fail(f"tracker {spec.name}: a pass is already running ({held}); this one does nothing (two at once "
                   "would test the same commits and disturb each other's runs)", EXIT_FAILED) from None


def _require_kexec_allowed(spec: TrackerSpec) -> None:
    """A tracker that boots this machine into its commits' kernels needs the machine's opt-in."""
    from perfline.targets import kexec, machine_settings
    from perfline.track.testing import cases

    if spec.fleet_class is None and any(case.target == "kexec" for case in cases(spec)):
        kexec.require_boot_allowed(machine_settings.load())


def carry_on(store: Store, name: str, boot_steps: BootSteps | None = None) -> None:
    """A kexec tracker after one of its boots, back on the default kernel (`perfline
    resume`): its pass goes on from the store, to the next boot or to its end."""
    from perfline.track.repository import check

    tracker = store.tracker(name)
    spec = _load(Path(tracker.file))
    with _one_pass_at_a_time(spec):
        check(spec, notify)
        _passes(store, spec, Path(tracker.file), True, 0.0, _pace_tolerance("10%"), boot_steps)


def _passes(store: Store, spec: TrackerSpec, file: Path, once: bool, interval: float, tolerance: float | None,
            boot_steps: BootSteps | None = None) -> None:
    from perfline.runner import RunContext, terminate_as_interrupt  # not above: slow to import
    from perfline.runner.kexec_resume import THIS_MACHINE, MachineBooting
    from perfline.track.tracking import run_pass

    with _progress() as observer, terminate_as_interrupt():
        ctx = RunContext(store=store, fingerprint=local.fingerprint, observer=observer)
        fetched = True  # by `check` just before
        try:
            while True:
                done = run_pass(store, spec, ctx, observer.bisect, notify, tolerance, fetched=fetched,
                                boot_steps=boot_steps or THIS_MACHINE)
                fetched = False
                notify(f"{spec.name}: tested {sum(t.complete for t in done.tested)} commit(s), "
                        f"{done.pending} pending, {sum(f.new for f in done.found)} new change(s), head "
                        f"{done.head[:12]}")
                if once:
                    break
                spec = _load(file)  # an edited file takes effect at the next pass
                time.sleep(60 * interval)
        except MachineBooting as booting:
            # Not a crash: the commit's kernel boots, and `perfline resume` carries the pass on.
            boot = booting.boot
            errors.print(f"{escape(spec.name)}: kexec boot {boot.id} into {escape(boot.kernel)} "
                         f"({escape(boot.release)}); `perfline resume` measures it after the boot and carries the "
                         "pass on", highlight=False, soft_wrap=True)
            return
        except KeyboardInterrupt:
            errors.print("[yellow]interrupted: `perfline track run` continues where this stopped[/yellow]")
            raise typer.Exit(EXIT_INTERRUPTED) from None
    from perfline.report.tracking import status_table

    console.print(status_table(_states(store, [spec.name])))


def _states(store: Store, names: list[str]) -> list[TrackerState]:
    from perfline.track.status import tracker_states

    return tracker_states(store, names, notify)


@track_app.command("status")
def status(
    name: Annotated[str | None, typer.Argument(help="A tracker (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Per tracker: head, last tested commit, tested and pending commits, open regressions,
    budget left today, and the daily number.

    Example: perfline track status demo
    """
    from perfline.report.tracking import numbers_table, status_table

    store = open_store()
    names = [name] if name else [t.name for t in store.trackers()]
    states = _states(store, names)
    if as_json:
        print(json.dumps([s.to_json() for s in states], indent=2))
        return
    if not states:
        console.print("no trackers yet: `perfline track run FILE` starts one")
        return
    console.print(status_table(states))
    if name:
        console.print(numbers_table(states[0]))


@track_app.command("list")
def list_trackers() -> None:
    """The trackers this store knows, with their files.

    Example: perfline track list
    """
    store = open_store()
    trackers = store.trackers()
    if not trackers:
        console.print("no trackers yet: `perfline track run FILE` starts one")
    for tracker in trackers:
        console.print(f"{tracker.name}\t{tracker.branch}\t{tracker.repo}\t{tracker.file}", highlight=False)


@track_app.command("forget")
def forget(name: Annotated[str, typer.Argument(help="The tracker.")]) -> None:
    """Forget a tracker and its daily numbers; its runs and regressions stay.

    Example: perfline track forget demo
    """
    open_store().forget_tracker(name)
    console.print(f"forgot tracker {name}; its runs stay (label {name})")


@track_app.command("graph")
def graph(
    name: Annotated[str, typer.Argument(help="The tracker.")],
    png: Annotated[Path, typer.Option("--png", help="The PNG file to write.")],
) -> None:
    """The daily number over the commits, with changes and culprits marked.

    Example: perfline track graph demo --png demo.png
    """
    from perfline.bisect.merges import entered_at
    from perfline.report.tracking import draw_graph
    from perfline.store.bisections import BisectionNotFound
    from perfline.track.repository import local_repo_here

    store = open_store()
    tracker = store.tracker(name)
    numbers = store.daily_numbers(name)
    if not numbers:
        raise fail(f"tracker {name} has no tested commit yet: `perfline track run {tracker.file}`")
    _, _, history = local_repo_here(store, _load(Path(tracker.file)))
    positions = {c.sha: i for i, c in enumerate(history)}
    regressions = store.regressions(tracker=name)
    for r in regressions:  # a culprit inside a merged branch is drawn at its merge
        if not r.culprit or r.culprit in positions or r.bisection_id is None:
            continue
        try:
            merge = entered_at(r.culprit, store.bisection(r.bisection_id))
        except BisectionNotFound:
            continue
        if merge in positions:
            positions[r.culprit] = positions[merge]
    draw_graph(name, numbers, regressions, positions, png)
    console.print(f"wrote {png}")


TIMER = """[Unit]
Description=perfline tracker {name}: test new commits daily

[Timer]
OnCalendar={calendar}
Persistent=true

[Install]
WantedBy=timers.target
"""

SERVICE = """[Unit]
Description=perfline tracker {name}
After=network-online.target

[Service]
Type=oneshot
WorkingDirectory={cwd}
Environment=PERFLINE_DB={db}
ExecStart={perfline} track run --once {file}
"""


@track_app.command("install-timer")
def install_timer(
    file: TrackerFile,
    directory: Annotated[Path, typer.Option("--dir", help="Where to write the unit files.")] = Path(
        "/etc/systemd/system"),
    calendar: Annotated[str, typer.Option(help="systemd OnCalendar= expression.")] = "*-*-* 02:00:00",
) -> None:
    """Write a systemd service and timer that run `track run --once FILE` every day.

    Example: perfline track install-timer tracker.yaml --calendar 02:00
    """
    from perfline.store import resolve_url

    spec = _load(file)
    directory.mkdir(parents=True, exist_ok=True)
    perfline = shlex.quote(str(Path(sys.argv[0]).resolve()))
    unit = f"perfline-track-{spec.name}"
    service = SERVICE.format(name=spec.name, cwd=Path.cwd(), db=resolve_url(state.db), perfline=perfline,
                             file=shlex.quote(str(file.resolve())))
    (directory / f"{unit}.service").write_text(service)
    (directory / f"{unit}.timer").write_text(TIMER.format(name=spec.name, calendar=calendar))
    console.print(f"wrote {directory / unit}.service and .timer; enable with: "
                  f"systemctl daemon-reload && systemctl enable --now {unit}.timer", highlight=False)
