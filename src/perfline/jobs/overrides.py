"""`KIND:KEY=VALUE` overrides, the two sides of `perfline ab`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import yaml

from perfline.benchmarks import BENCHMARKS
from perfline.jobs.parse import check_sysfs_path, job_from_benchmark
from perfline.jobs.vm import KEXEC_KEYS, check_guest_job, with_target
from perfline.records.job import (
    COMMAND_LINE,
    SINGLE_VALUED_KINDS,
    AxisValue,
    JobError,
    JobSpec,
    ParamValue,
)
from perfline.targets.kernels import KernelError, get_kernel

KINDS = ("param", "sysctl", "sysfs", "governor", "pin", "kernel", "cmdline")
# What the VM of a qemu target boots: a registered kernel, extra kernel parameters.
VM_KINDS = ("kernel", "cmdline")
_SYSCTL = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+")
EXAMPLES = (
    "param:loops=1000, sysctl:kernel.sched_autogroup_enabled=0, "
    "sysfs:/sys/module/rcutree/parameters/jiffies_till_first_fqs=1, pin:0-1, governor:performance; "
    "with target qemu kernel:debian-6.12, cmdline:rcutree.jiffies_till_first_fqs=0"
)


def parse_override(text: str) -> tuple[str, str, str]:
    """`sysctl:vm.swappiness=10` → ("sysctl", "vm.swappiness", "10"); `pin:0-1` and
    `governor:performance`, `kernel:debian-6.12` and `cmdline:a=1 b=2` have no key."""
    kind, colon, rest = text.partition(":")
    kind = kind.strip()
    if not colon or kind not in KINDS:
        raise _error(text, f"unknown override kind {kind!r}: use one of {', '.join(KINDS)}")
    if kind == "kernel" and not rest.strip():
        raise _error(text, "kernel: needs a registered kernel's name (see `perfline kernels list`)")
    if kind in SINGLE_VALUED_KINDS or kind == "kernel":
        return kind, kind, rest.strip()
    key, equals, value = rest.partition("=")
    if not equals or not key.strip():
        raise _error(text, "expected KIND:KEY=VALUE")
    key = key.strip()
    if kind == "sysctl" and not _SYSCTL.fullmatch(key):
        raise _error(text, f"sysctl name {key!r} must be dotted, like vm.swappiness")
    if kind == "sysfs":
        check_sysfs_path(key, lambda message: _error(text, message), "in a sysctl: override")
    return kind, key, value.strip()


def apply_overrides(job: JobSpec, overrides: list[str], **target: Any) -> JobSpec:
    """`job` with one side's overrides applied, checked as a job file would be.

    `target` holds `with_target`'s options for both sides (`perfline ab --target qemu
    --kernel NAME ...`, the same code path as `perfline run`); a side's `kernel:` and
    `cmdline:` win over `--kernel` and `--cmdline`, as its `param:` wins over `--param`.
    Params are validated as on the command line. With target qemu the side's VM boots
    its kernel (VmSpec.kernel, as bisection's `with_kernel` sets it), and host tunables
    are refused as the job parser refuses them: they would not reach the guest.
    """
    params: dict[str, AxisValue] = dict(job.params)
    host: list[tuple[str, str, str, ParamValue]] = []  # (override, kind, key, value)
    vm: dict[str, str] = {}  # kind → override
    for text in overrides:
        kind, key, value = parse_override(text)
        if kind == "param":
            params[key] = value
        elif kind in VM_KINDS:
            target[kind], vm[kind] = value, text
        else:
            host.append((text, kind, key, _scalar(value)))
    checked = job_from_benchmark(job.benchmark, params, monitors=job.monitors)
    benchmark = BENCHMARKS.get(job.benchmark)
    chosen = target.get("target") or job.target
    # Target kexec boots a side's kernel (with its cmdline) on this machine; the rest is a VM's.
    not_here = {kind: text for kind, text in vm.items() if chosen != "qemu" and not (
        chosen == "kexec" and kind in KEXEC_KEYS)}
    if not_here:
        raise _plain(
            next(iter(not_here.values())),
            "applies to a VM: use a qemu target (--target qemu, or `target: qemu` in the job file)",
        )
    if "kernel" in vm:  # named here, or the error would blame --kernel
        try:
            get_kernel(target["kernel"])
        except KernelError as exc:
            raise _plain(vm["kernel"], str(exc)) from None
    side = with_target(replace(job, params=checked.params), benchmark, **target)
    tunables = {kind: dict(values) for kind, values in side.tunables.items()}
    for text, kind, key, knob in host:
        if side.vm is not None:
            def naming(_key: str, text: str = text) -> Callable[[str], JobError]:
                return _naming(text)

            check_guest_job(benchmark, {kind: {key: knob}}, naming)
        tunables.setdefault(kind, {})[key] = knob
    return replace(side, tunables=tunables)


def _naming(text: str) -> Callable[[str], JobError]:
    return lambda message: _plain(text, message)


def _plain(text: str, message: str) -> JobError:
    return JobError(COMMAND_LINE, None, f"{text!r}: {message}")


def _scalar(text: str) -> ParamValue:
    # As a job file would read it, so `=1` on the command line and `: 1` in YAML are one case.
    value = yaml.safe_load(text) if text else ""
    return value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else text


def _error(text: str, message: str) -> JobError:
    return JobError(COMMAND_LINE, None, f"{text!r}: {message} (e.g. {EXAMPLES})")
