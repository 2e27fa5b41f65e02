"""`perfline run --sysctl/--sysfs/--governor/--pin/--load`: tunables given on the command
line, laid over a job's own (replacing a key the job sets, a list value included).

The values are checked as a job file's are (`parse_override` for the `KIND:KEY=VALUE`
form `perfline ab` takes, the job parser's checks for the rest); errors name the option.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from perfline.jobs.overrides import EXAMPLES, apply_overrides, parse_override
from perfline.jobs.parse import (
    check_cpu_list,
    check_governor,
    check_hog_count,
    check_sysfs_path,
)
from perfline.records.job import COMMAND_LINE, JobError, JobSpec, ParamValue

# kind → (option, its value's form, an example value)
KEYED_OPTIONS = {
    "sysctl": ("--sysctl", "NAME=VALUE", "vm.swappiness=10"),
    "sysfs": ("--sysfs", "PATH=VALUE", "/sys/module/rcutree/parameters/jiffies_till_first_fqs=1"),
}
# Tunables as in JobSpec.tunables: kind → key → value (spec.py).
Tunables = dict[str, dict[str, ParamValue]]


def with_tunables(
    job: JobSpec,
    *,
    sysctl: Sequence[str] = (),
    sysfs: Sequence[str] = (),
    governor: str | None = None,
    pin: str | None = None,
    load: str | None = None,
) -> tuple[JobSpec, Tunables]:
    """The job with the options' tunables, and those tunables alone (for checks that
    only the command line's get, such as whether the knobs exist here)."""
    overrides: list[str] = []
    keys: dict[str, list[str]] = {}
    for kind, items in (("sysctl", sysctl), ("sysfs", sysfs)):
        for item in items:
            key = _key(kind, item)
            if key in keys.get(kind, []):
                raise _fail(KEYED_OPTIONS[kind][0])(f"{key} is given twice")
            keys.setdefault(kind, []).append(key)
            overrides.append(f"{kind}:{item}")
    if overrides:
        job = apply_overrides(job, overrides)
    # An override sets one value, never a list (a matrix axis): scalars only here.
    given: Tunables = {
        kind: {key: value for key in names if not isinstance(value := job.tunables[kind][key], list)}
        for kind, names in keys.items()
    }
    if governor is not None:
        given["governor"] = {"governor": check_governor(governor.strip(), _fail("--governor"))}
    if pin is not None:
        given["pin"] = {"pin": check_cpu_list(pin, _fail("--pin"))}
    if load is not None:
        count: ParamValue = int(load) if load.strip().isdigit() else load.strip()
        given["load"] = {"load": check_hog_count(count, _fail("--load"))}
    tunables = {kind: dict(values) for kind, values in job.tunables.items()}
    for kind in ("governor", "pin", "load"):
        if kind in given:
            tunables[kind] = dict(given[kind])
    return replace(job, tunables=tunables), given


def _key(kind: str, item: str) -> str:
    """The knob `--sysctl NAME=VALUE` or `--sysfs PATH=VALUE` sets, checked."""
    option, form, example = KEYED_OPTIONS[kind]

    def fail(message: str) -> JobError:
        return _fail(f"{option} {item!r}")(f"{message} (e.g. {option} {example})")

    if kind == "sysfs":
        # Before parse_override, whose message would point a /proc/sys path to `ab`'s
        # sysctl: overrides rather than to --sysctl.
        check_sysfs_path(item.partition("=")[0].strip(), fail, sysctl_where="with --sysctl")
    text = f"{kind}:{item}"
    try:
        _, key, _ = parse_override(text)
    except JobError as exc:
        # parse_override speaks of `KIND:KEY=VALUE` overrides; say it for this option.
        message = exc.message.removeprefix(f"{text!r}: ").removesuffix(f" (e.g. {EXAMPLES})")
        raise fail(message.replace("KIND:KEY=VALUE", form)) from None
    return key


def _fail(option: str) -> Callable[[str], JobError]:
    return lambda message: JobError(COMMAND_LINE, None, f"{option}: {message}")
