"""Job and case records."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perfline.records.errors import UserError

# A parameter's or tunable's value as a job sets it.
ParamValue = int | float | str | bool

# Tunable kinds a job may name; applying them is the tunables package's job.
#
# Representation, the same in JobSpec.tunables (values may be lists: matrix axes) and
# Case.tunables (every value fixed); a kind a job does not name is absent:
#
#   sysctl    {"sysctl": {"kernel.sched_autogroup_enabled": 0, ...}}   dotted names
#   sysfs     {"sysfs": {"/sys/module/rcutree/parameters/x": 1, ...}}   absolute paths under /sys
#   governor  {"governor": {"governor": "performance"}}   cpufreq governor for every CPU
#   pin       {"pin": {"pin": "0-1"}}                     CPU list (kernel cpulist syntax, str)
#
# `governor` and `pin` are single-valued: their inner mapping always has exactly one
# entry, keyed by the kind's own name (Case.governor / Case.pin read it).
TUNABLE_KINDS = ("sysctl", "sysfs", "governor", "pin")
# `load` (N CPU hogs beside each repetition) and `cmdline` (extra kernel parameters of
# a VM target) are written as top-level job keys but travel with the tunables: they
# are conditions of the run that the matrix may vary.
SINGLE_VALUED_KINDS = ("governor", "pin", "load", "cmdline")
# kexec: this machine boots the kernel under test (targets.kexec), only where allowed.
TARGETS = ("local", "qemu", "kexec")
ACCELS = ("auto", "kvm", "tcg")
# What JobError names as the "file" of a job built from command-line options.
COMMAND_LINE = "command line"


class JobError(UserError, ValueError):
    """A job file problem, printed as `file:line: message`."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        super().__init__(message, path, line)


# `repeat: auto` never stops before this many runs: a CI from 2-4 runs is itself too
# uncertain to trust, and the rank test beside it needs 5 per side for p < 0.01.
AUTO_MIN_REPEAT = 5
AUTO_MAX_REPEAT = 30
AUTO_PRECISION_PCT = 1.0

# A value as written in the job: a scalar, or a list of scalars (a matrix axis).
AxisValue = ParamValue | list[ParamValue]


@dataclass(frozen=True)
class VmSpec:
    """How the `qemu` target boots. The kernel is a name in the kernel registry; it is
    not part of a case's identity, so that runs on two kernels compare case by case."""

    kernel: str
    cpus: int = 2
    memory_mb: int = 1024
    accel: str = "auto"


@dataclass(frozen=True)
class JobSpec:
    """A validated job file (or a job built from the command line)."""

    name: str
    benchmark: str
    params: dict[str, AxisValue] = field(default_factory=dict)
    # With precision_pct set, repeat is the cap of an adaptive run count (`repeat: auto`).
    repeat: int = 5
    warmup: int = 1
    monitors: tuple[str, ...] = ()
    # kind → key → value, e.g. {"sysctl": {"kernel.sched_autogroup_enabled": [0, 1]}}
    tunables: dict[str, dict[str, AxisValue]] = field(default_factory=dict)
    target: str = "local"
    path: Path | None = None
    precision_pct: float | None = None
    vm: VmSpec | None = None  # set exactly when target is qemu
    # `tune: true`: the machine tuned around each run (system.tuning), reset after.
    tune: bool = False
    # The registered kernel the machine boots, set exactly when target is kexec; like a
    # VM's kernel, not part of a case's identity.
    boot_kernel: str | None = None
    # Target kexec: `reboot` lets the machine boot the kernel through the boot loader's
    # one-shot entry where kexec is refused (targets.boot_entry); `kexec` does not.
    boot: str = "kexec"
    # Target kexec: `watchdog: SECONDS` resets a tested kernel that hangs (targets.watchdog);
    # 0 is the job's `watchdog: off`, None a job that says nothing (the administrator's settings).
    watchdog: int | None = None


@dataclass(frozen=True)
class Case:
    """One point of a job's matrix: every list value fixed."""

    job: str
    benchmark: str
    # All parameters, defaults filled in, so equal cases have equal keys across runs.
    params: dict[str, ParamValue]
    tunables: dict[str, dict[str, ParamValue]]
    repeat: int
    warmup: int
    monitors: tuple[str, ...]
    target: str
    # Adaptive run count: repeat until the CI half-width of the mean is within this
    # many % (at least AUTO_MIN_REPEAT runs, at most `repeat`). None: exactly `repeat`.
    precision_pct: float | None = None
    vm: VmSpec | None = None
    # The machine tuned around the run (system.tuning). Not part of the key: a tuned
    # and an untuned run are the same case, told apart by their fingerprints.
    tune: bool = False
    boot_kernel: str | None = None  # target kexec: the registered kernel booted
    boot: str = "kexec"  # target kexec: `reboot` where kexec is refused, if the job allows it
    watchdog: int | None = None  # target kexec: the job's watchdog seconds (0: off; None: not said)

    @property
    def key(self) -> str:
        """Stable identity of the case within its benchmark.

        Sorted parameters, then tunables by kind, e.g.
        `clients=4,duration=5.0,governor:performance,sysctl:kernel.x=1`. Independent of
        the order in the job file; strings holding separators are JSON-quoted.
        """
        parts = [f"{k}={_fmt(v)}" for k, v in sorted(self.params.items())]
        for kind, values in sorted(self.tunables.items()):
            if kind in SINGLE_VALUED_KINDS:
                parts += [f"{kind}:{_fmt(v)}" for v in values.values()]
            else:
                parts += [f"{kind}:{k}={_fmt(v)}" for k, v in sorted(values.items())]
        return ",".join(parts) or "default"

    @property
    def governor(self) -> str | None:
        """The cpufreq governor this case sets, if any."""
        value = self.tunables.get("governor", {}).get("governor")
        return None if value is None else str(value)

    @property
    def cmdline(self) -> str:
        """Extra kernel parameters a VM or kexec target boots with ('' if none)."""
        return str(self.tunables.get("cmdline", {}).get("cmdline", ""))

    @property
    def pin(self) -> str | None:
        """The CPU list (e.g. `0-1`) this case pins the benchmark to, if any."""
        value = self.tunables.get("pin", {}).get("pin")
        return None if value is None else str(value)


_KEY_SPECIALS = frozenset(',=:"\\')


def _fmt(value: ParamValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and (
        not value or any(c in _KEY_SPECIALS or c.isspace() for c in value)
    ):
        return json.dumps(value)
    return str(value)


def case_to_json(case: Case) -> dict[str, Any]:
    """A case as plain JSON, to travel in a queued fleet job and come back equal."""
    return {
        "job": case.job, "benchmark": case.benchmark, "params": dict(case.params),
        "tunables": {kind: dict(values) for kind, values in case.tunables.items()},
        "repeat": case.repeat, "warmup": case.warmup, "monitors": list(case.monitors),
        "target": case.target, "precision_pct": case.precision_pct,
        "vm": None if case.vm is None else asdict(case.vm), "tune": case.tune, "boot_kernel": case.boot_kernel,
        "boot": case.boot, "watchdog": case.watchdog,
    }


def case_from_json(data: dict[str, Any]) -> Case:
    vm = data.get("vm")
    return Case(
        job=data["job"], benchmark=data["benchmark"], params=dict(data["params"]),
        tunables={kind: dict(values) for kind, values in data["tunables"].items()},
        repeat=int(data["repeat"]), warmup=int(data["warmup"]), monitors=tuple(data["monitors"]),
        target=data["target"], precision_pct=data.get("precision_pct"),
        vm=None if vm is None else VmSpec(**vm), tune=bool(data.get("tune", False)),
        boot_kernel=data.get("boot_kernel"), boot=data.get("boot", "kexec"), watchdog=data.get("watchdog"),
    )
