"""`KIND:KEY=VALUE` overrides, the two sides of `perfline ab`."""

from __future__ import annotations

import re
from dataclasses import replace

import yaml

from perfline.benchmarks import ParamValue
from perfline.jobs.parse import job_from_benchmark
from perfline.jobs.spec import COMMAND_LINE, SINGLE_VALUED_KINDS, AxisValue, JobError, JobSpec

KINDS = ("param", "sysctl", "sysfs", "governor", "pin")
_SYSCTL = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+")
EXAMPLES = (
    "param:loops=1000, sysctl:kernel.sched_autogroup_enabled=0, "
    "sysfs:/sys/module/rcutree/parameters/jiffies_till_first_fqs=1, pin:0-1, governor:performance"
)


def parse_override(text: str) -> tuple[str, str, str]:
    """`sysctl:vm.swappiness=10` → ("sysctl", "vm.swappiness", "10"); `pin:0-1` and
    `governor:performance` have no key."""
    kind, colon, rest = text.partition(":")
    kind = kind.strip()
    if not colon or kind not in KINDS:
        raise _error(text, f"unknown override kind {kind!r}: use one of {', '.join(KINDS)}")
    if kind in SINGLE_VALUED_KINDS:
        return kind, kind, rest.strip()
    key, equals, value = rest.partition("=")
    if not equals or not key.strip():
        raise _error(text, "expected KIND:KEY=VALUE")
    key = key.strip()
    if kind == "sysctl" and not _SYSCTL.fullmatch(key):
        raise _error(text, f"sysctl name {key!r} must be dotted, like vm.swappiness")
    if kind == "sysfs" and not key.startswith("/sys/"):
        raise _error(text, f"sysfs path {key!r} must be an absolute path under /sys/")
    return kind, key, value.strip()


def apply_overrides(job: JobSpec, overrides: list[str]) -> JobSpec:
    """`job` with the overrides applied; params are validated as on the command line."""
    params: dict[str, AxisValue] = dict(job.params)
    tunables = {kind: dict(values) for kind, values in job.tunables.items()}
    for text in overrides:
        kind, key, value = parse_override(text)
        if kind == "param":
            params[key] = value
        else:
            tunables.setdefault(kind, {})[key] = _scalar(value)
    checked = job_from_benchmark(job.benchmark, params, monitors=job.monitors)
    return replace(job, params=checked.params, tunables=tunables)


def _scalar(text: str) -> ParamValue:
    # As a job file would read it, so `=1` on the command line and `: 1` in YAML are one case.
    value = yaml.safe_load(text) if text else ""
    return value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else text


def _error(text: str, message: str) -> JobError:
    return JobError(COMMAND_LINE, None, f"{text!r}: {message} (e.g. {EXAMPLES})")
