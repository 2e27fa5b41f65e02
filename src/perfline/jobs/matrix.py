"""Matrix expansion: a JobSpec → its Cases.

Every list value (in `params` and in `tunables`) is an axis. Cases are the cartesian
product of the axes, taken in file order (params first, then tunables by kind and key
as written), with the last axis varying fastest. The order is deterministic; a Case's
identity is its `key`, which does not depend on that order.
"""

from __future__ import annotations

import itertools
import math

from perfline.jobs.lookup import benchmark_class
from perfline.records.job import (
    COMMAND_LINE,
    AxisValue,
    Case,
    JobError,
    JobSpec,
    ParamValue,
)

MAX_CASES = 1000


def _axes(job: JobSpec) -> list[tuple[tuple[str, str], list[ParamValue]]]:
    """(("param", name) | (kind, key), values) for every setting; scalars are 1-long axes."""
    axes: list[tuple[tuple[str, str], list[ParamValue]]] = []
    for name, value in job.params.items():
        axes.append((("param", name), _values(value)))
    for kind, settings in job.tunables.items():
        for key, value in settings.items():
            axes.append(((kind, key), _values(value)))
    return axes


def _values(value: AxisValue) -> list[ParamValue]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def case_count(job: JobSpec) -> int:
    return math.prod(len(values) for _, values in _axes(job))


def _label(kind: str, key: str) -> str:
    if kind == "param":
        return key
    return kind if kind == key else f"{kind} {key}"


def _where(job: JobSpec) -> str:
    return str(job.path) if job.path is not None else COMMAND_LINE


def check_size(job: JobSpec, line: int | None = None) -> None:
    """Refuse a matrix over MAX_CASES cases, naming the axes that make it big."""
    count = case_count(job)
    if count <= MAX_CASES:
        return
    sizes = " × ".join(
        f"{len(values)} {_label(kind, key)}"
        for (kind, key), values in _axes(job)
        if len(values) > 1
    )
    raise JobError(
        _where(job),
        line,
        f"matrix too large: {sizes} = {count} cases (limit {MAX_CASES}); "
        "shorten the lists or split the job",
    )


def expand(job: JobSpec) -> list[Case]:
    """All cases of `job`, each with every parameter (defaults filled in) fixed."""
    check_size(job)
    cls = benchmark_class(job.benchmark, lambda message: JobError(_where(job), None, message))
    axes = _axes(job)
    cases: list[Case] = []
    for point in itertools.product(*(values for _, values in axes)):
        given: dict[str, ParamValue] = {}
        tunables: dict[str, dict[str, ParamValue]] = {}
        for ((kind, key), _), value in zip(axes, point, strict=True):
            if kind == "param":
                given[key] = value
            else:
                tunables.setdefault(kind, {})[key] = value
        params = cls.resolve_params(given)
        for name, value in params.items():
            param = cls.param(name)
            # A default written as an int for a float parameter: one spelling per case.
            if param is not None and param.type is float and type(value) is int:
                params[name] = float(value)
        cases.append(
            Case(
                job=job.name,
                benchmark=job.benchmark,
                params=params,
                tunables=tunables,
                repeat=job.repeat,
                warmup=job.warmup,
                monitors=job.monitors,
                target=job.target,
                precision_pct=job.precision_pct,
                vm=job.vm,
                tune=job.tune,
                boot_kernel=job.boot_kernel,
                boot=job.boot,
                watchdog=job.watchdog,
            )
        )
    return cases
