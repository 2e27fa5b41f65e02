"""A job from a command line: `run` and `ab` describe what to measure with a job file or
a benchmark name plus options; one function turns them into the cases to run.

Every option is checked as a job file's key would be, and errors are JobErrors naming
the option (`command line: --pin: ...`) or UserErrors, never half-applied options.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from perfline.benchmarks import BENCHMARKS
from perfline.jobs.cli_tunables import Tunables, with_tunables
from perfline.jobs.matrix import expand
from perfline.jobs.overrides import apply_overrides
from perfline.jobs.parse import job_from_benchmark, load_job, parse_param_args, repeat_policy
from perfline.jobs.vm import with_target
from perfline.plugins import UnknownName
from perfline.records.errors import UserError
from perfline.records.job import COMMAND_LINE, Case, JobError, JobSpec


@dataclass(frozen=True)
class Target:
    """`--target`, `--kernel`, `--cmdline`, `--vm-cpus`, `--vm-memory`, `--accel`, `--boot`,
    `--watchdog`; the field names are `jobs.vm.with_target`'s keyword arguments."""

    target: str | None = None
    kernel: str | None = None
    cmdline: str | None = None
    cpus: int | None = None
    memory_mb: int | None = None
    accel: str | None = None
    boot: str | None = None  # kexec: `reboot` where kexec is refused
    watchdog: str | None = None  # kexec: SECONDS or `off`, as the job file's `watchdog:`


@dataclass(frozen=True)
class CommandLineJob:
    """What `perfline run` and `perfline ab` were asked to measure."""

    what: str  # a job file or a benchmark name
    params: Sequence[str] = ()  # KEY=VALUE, for a benchmark name
    monitors: Sequence[str] | None = None  # None: the job's own (a benchmark's: the defaults)
    no_monitors: bool = False
    repeat: str | None = None  # a count or `auto`
    precision: str | None = None
    max_repeat: int | None = None
    warmup: int | None = None
    sysctl: Sequence[str] = ()
    sysfs: Sequence[str] = ()
    governor: str | None = None
    pin: str | None = None
    load: str | None = None
    target: Target = field(default_factory=Target)
    tune: bool = False  # --tune: tuned around the run, whatever the job file says


def build_job(request: CommandLineJob) -> tuple[JobSpec, Tunables]:
    """The job with every option laid over it, and the tunables the options set (which
    only the command line's get checked against this host before anything runs)."""
    job = _base(request)
    job, given = with_tunables(job, sysctl=request.sysctl, sysfs=request.sysfs, governor=request.governor,
                               pin=request.pin, load=request.load)
    job = with_target(job, BENCHMARKS.get(job.benchmark), **asdict(request.target))
    job = _with_repeat(job, request.repeat, request.precision, request.max_repeat)
    if request.warmup is not None:
        job = replace(job, warmup=request.warmup)
    if request.tune:
        job = replace(job, tune=True)
    return job, given


def build_ab(request: CommandLineJob, a: list[str], b: list[str], pairs: int) -> tuple[Case, Case]:
    """`perfline ab`: the two sides' one case each, measured once per pair; a side's
    `kernel:`/`cmdline:` overrides win over --kernel and --cmdline."""
    job = _base(request)
    if request.warmup is not None:
        job = replace(job, warmup=request.warmup)
    job = replace(job, repeat=pairs, precision_pct=None, tune=job.tune or request.tune)
    sides = [expand(apply_overrides(job, overrides, **asdict(request.target))) for overrides in (a, b)]
    if any(len(cases) != 1 for cases in sides):
        raise UserError("ab needs one case per side: remove the list values (matrix axes) from the job")
    (case_a,), (case_b,) = sides
    return case_a, case_b


def _base(request: CommandLineJob) -> JobSpec:
    """The job file or the benchmark with its --param values, and the chosen monitors."""
    path = Path(request.what)
    chosen = () if request.no_monitors else (tuple(request.monitors) if request.monitors else None)
    try:
        if path.suffix in (".yaml", ".yml") or path.is_file():
            if request.params:
                raise UserError("--param is for a benchmark name; set params in the job file")
            job = load_job(path)
            return job if chosen is None else replace(job, monitors=chosen)
        return job_from_benchmark(request.what, parse_param_args(request.params), monitors=chosen)
    except UnknownName as exc:
        raise UserError(str(exc).strip("'\"")) from None


def _with_repeat(job: JobSpec, repeat: str | None, precision: str | None, max_repeat: int | None) -> JobSpec:
    if repeat is None and precision is None and max_repeat is None:
        return job
    if repeat is None:
        repeat = "auto" if job.precision_pct is not None else str(job.repeat)
    count, precision_pct = repeat_policy(
        _int_or_auto(repeat), precision, max_repeat, lambda key: _option_error(f"--{key.replace('_', '-')}")
    )
    return replace(job, repeat=count, precision_pct=precision_pct)


def _int_or_auto(text: str) -> int | str:
    return int(text) if text.strip().isdigit() else text.strip()


def _option_error(option: str) -> Callable[[str], JobError]:
    return lambda message: JobError(COMMAND_LINE, None, f"{option}: {message}")
