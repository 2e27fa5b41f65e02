"""Job and case records."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfline.benchmarks import ParamValue

# Tunable kinds a job may name; applying them is the tunables package's job.
TUNABLE_KINDS = ("sysctl", "sysfs", "governor", "pin")
TARGETS = ("local",)


class JobError(ValueError):
    """A job file problem, printed as `file:line: message`."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


# A value as written in the job: a scalar, or a list of scalars (a matrix axis).
AxisValue = ParamValue | list[ParamValue]


@dataclass(frozen=True)
class JobSpec:
    """A validated job file (or a job built from the command line)."""

    name: str
    benchmark: str
    params: dict[str, AxisValue] = field(default_factory=dict)
    repeat: int = 5
    warmup: int = 1
    monitors: tuple[str, ...] = ()
    # kind → key → value, e.g. {"sysctl": {"kernel.sched_autogroup_enabled": [0, 1]}}
    tunables: dict[str, dict[str, AxisValue]] = field(default_factory=dict)
    target: str = "local"
    path: Path | None = None


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

    @property
    def key(self) -> str:
        """Stable identity of the case within its benchmark, e.g. `clients=4,duration=5`."""
        parts = [f"{k}={_fmt(v)}" for k, v in sorted(self.params.items())]
        for kind, values in sorted(self.tunables.items()):
            parts += [f"{kind}:{k}={_fmt(v)}" for k, v in sorted(values.items())]
        return ",".join(parts) or "default"


def _fmt(value: ParamValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
