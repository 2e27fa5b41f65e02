"""The `qemu` target's settings: checks shared by job files and command-line options.

`fail_for(key)` gives the error factory for a key, so that a job file points at the
offending line and the command line names the offending option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from typing import Any

from perfline.benchmarks import BENCHMARKS, Benchmark
from perfline.benchmarks.base import CommandBenchmark
from perfline.records.job import (
    ACCELS,
    COMMAND_LINE,
    TARGETS,
    JobError,
    JobSpec,
    VmSpec,
)
from perfline.targets.kernels import KernelError, get_kernel
from perfline.targets.watchdog import MIN_SECONDS

# Job keys that describe the VM; `cmdline` travels with the tunables (spec.py). Target
# kexec takes the first two.
VM_KEYS = ("kernel", "cmdline", "vm_cpus", "vm_memory", "accel")
KEXEC_KEYS = ("kernel", "cmdline")
# `boot:` of a kexec job: `reboot` allows the boot loader's one-shot entry where kexec is refused.
BOOT_WAYS = ("kexec", "reboot")
MIN_MEMORY_MB = 128
# Tunables that still mean something with a VM: load runs on this host, cmdline boots.
GUEST_TUNABLES = ("load", "cmdline")

FailFor = Callable[[str], Callable[[str], JobError]]


def vm_spec(
    kernel: Any, cpus: Any, memory_mb: Any, accel: Any, fail_for: FailFor
) -> VmSpec:
    """A validated VmSpec; None for an option means its default."""
    kernel = registered(kernel, "qemu", fail_for)
    defaults = VmSpec(kernel)
    return VmSpec(
        kernel=kernel,
        cpus=_count("vm_cpus", defaults.cpus if cpus is None else cpus, 1, fail_for),
        memory_mb=_count(
            "vm_memory", defaults.memory_mb if memory_mb is None else memory_mb, MIN_MEMORY_MB, fail_for
        ),
        accel=_accel(defaults.accel if accel is None else accel, fail_for),
    )


def check_guest_job(
    benchmark: type[Benchmark], tunables: Mapping[str, Any], fail_for: FailFor
) -> None:
    """What a VM cannot run yet: benchmarks whose repetition is more than one command,
    and tunables, which perfline applies on this host and so would miss the guest."""
    if not issubclass(benchmark, CommandBenchmark):
        runnable = [b.name for b in BENCHMARKS.all() if issubclass(b, CommandBenchmark)]
        raise fail_for("target")(
            f"benchmark {benchmark.name!r} cannot run with target qemu: only benchmarks whose "
            f"repetition is one command run in a VM so far ({', '.join(runnable)})"
        )
    for kind in tunables:
        if kind not in GUEST_TUNABLES:
            raise fail_for("tunables")(
                f"tunables.{kind} would be applied on this host, not in the VM; with target "
                "qemu give kernel parameters in cmdline instead"
            )


def with_target(
    job: JobSpec,
    benchmark: type[Benchmark],
    *,
    target: str | None = None,
    kernel: str | None = None,
    cmdline: str | None = None,
    cpus: int | None = None,
    memory_mb: int | None = None,
    accel: str | None = None,
    boot: str | None = None,
    watchdog: str | None = None,
) -> JobSpec:
    """The job with `perfline run --target/--kernel/...` laid over it."""
    options = {"kernel": kernel, "cmdline": cmdline, "vm_cpus": cpus, "vm_memory": memory_mb, "accel": accel}

    def fail_for(key: str) -> Callable[[str], JobError]:
        option = key if key == "tunables" else f"--{key.replace('_', '-')}"
        return lambda message: JobError(COMMAND_LINE, None, f"{option}: {message}")

    target = target or job.target
    if target not in TARGETS:
        raise fail_for("target")(f"unknown target {target!r}: expected one of {', '.join(TARGETS)}")
    if boot is not None and (target != "kexec" or boot not in BOOT_WAYS):
        raise fail_for("boot")(f"{boot!r}: give kexec or reboot, with --target kexec")
    if watchdog is not None and target != "kexec":
        raise fail_for("watchdog")("applies only to --target kexec")
    if target == "kexec":
        for key in ("vm_cpus", "vm_memory", "accel"):
            if options[key] is not None:
                raise fail_for(key)("applies only to --target qemu")
        tunables = dict(job.tunables)
        if cmdline is not None:
            tunables["cmdline"] = {"cmdline": cmdline.strip()}
        name = boot_kernel(job.boot_kernel if kernel is None else kernel, fail_for)
        seconds = job.watchdog if watchdog is None else watchdog_seconds(_seconds(watchdog), fail_for("watchdog"))
        return replace(job, target=target, vm=None, boot_kernel=name, tunables=tunables, boot=boot or job.boot,
                       watchdog=seconds)
    if target != "qemu":
        for key, value in options.items():
            if value is not None:
                raise fail_for(key)("applies only to --target qemu or kexec")
        return replace(job, target=target, vm=None, boot_kernel=None, boot="kexec", watchdog=None)
    # The job file's VM settings, where the command line gives none.
    given = asdict(job.vm) if job.vm is not None else {}
    vm = vm_spec(
        given.get("kernel") if kernel is None else kernel,
        given.get("cpus") if cpus is None else cpus,
        given.get("memory_mb") if memory_mb is None else memory_mb,
        given.get("accel") if accel is None else accel,
        fail_for,
    )
    tunables = dict(job.tunables)
    if cmdline is not None:
        tunables["cmdline"] = {"cmdline": cmdline.strip()}
    check_guest_job(benchmark, tunables, fail_for)
    return replace(job, target=target, vm=vm, tunables=tunables, boot_kernel=None)


def watchdog_seconds(value: Any, fail: Callable[[str], JobError]) -> int:
    """A kexec job's `watchdog:`: seconds (the tested kernel must reach its systemd
    within them), or `off` (YAML reads an unquoted off as false), which is 0."""
    if value is False or value == "off":
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_SECONDS:
        raise fail(f"watchdog must be seconds, at least {MIN_SECONDS} (the tested kernel's systemd must take the "
                   f"watchdog over within them), e.g. `watchdog: 300`, or `off`; got {value!r}")
    return value


def _seconds(text: str) -> int | str:
    """`--watchdog`'s text as the job file's YAML would read it: a number or `off`."""
    return int(text) if text.strip().isdigit() else text.strip()


def boot_kernel(kernel: Any, fail_for: FailFor) -> str:
    """Target kexec's kernel: a registered one (`perfline kernels list` on the machine)."""
    return registered(kernel, "kexec", fail_for)


def registered(kernel: Any, target: str, fail_for: FailFor) -> str:
    """The name of a registered kernel, which the target needs."""
    if kernel is None:
        raise fail_for("kernel")(f"target {target} needs a kernel: `kernel: NAME` (see `perfline kernels list`)")
    if not isinstance(kernel, str):
        raise fail_for("kernel")(f"kernel must be a registered kernel's name, got {kernel!r}; quote it")
    try:
        get_kernel(kernel)
    except KernelError as exc:
        raise fail_for("kernel")(str(exc)) from None
    return kernel


def _count(key: str, value: Any, minimum: int, fail_for: FailFor) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        unit = " (MiB)" if key == "vm_memory" else ""
        raise fail_for(key)(f"{key} must be an integer >= {minimum}{unit}, got {value!r}")
    return value


def _accel(value: Any, fail_for: FailFor) -> str:
    if value not in ACCELS:
        raise fail_for("accel")(f"accel must be one of {', '.join(ACCELS)}, got {value!r}")
    return str(value)
