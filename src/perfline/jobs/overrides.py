"""`KIND:KEY=VALUE` overrides, the two sides of `perfline ab`."""

from __future__ import annotations

from dataclasses import replace

from perfline.jobs.parse import job_from_benchmark
from perfline.jobs.spec import COMMAND_LINE, AxisValue, JobError, JobSpec

# Kinds an override may name today; sysctl/sysfs/pin arrive with applied tunables.
KINDS = ("param",)


def parse_override(text: str) -> tuple[str, str, str]:
    kind, colon, rest = text.partition(":")
    key, equals, value = rest.partition("=")
    if not colon or not equals or not key.strip():
        raise JobError(COMMAND_LINE, None, f"{text!r}: expected KIND:KEY=VALUE, e.g. param:loops=1000")
    kind = kind.strip()
    if kind not in KINDS:
        raise JobError(
            COMMAND_LINE,
            None,
            f"{text!r}: unknown override kind {kind!r}; this version supports {', '.join(KINDS)}",
        )
    return kind, key.strip(), value.strip()


def apply_overrides(job: JobSpec, overrides: list[str]) -> JobSpec:
    """`job` with the overrides applied and validated as if typed on the command line."""
    params: dict[str, AxisValue] = dict(job.params)
    for text in overrides:
        _, key, value = parse_override(text)
        params[key] = value
    checked = job_from_benchmark(job.benchmark, params, monitors=job.monitors)
    return replace(job, params=checked.params)
