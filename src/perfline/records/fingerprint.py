"""The fingerprint of a system under test: what must match for two results to be comparable."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Fingerprint:
    hostname: str
    machine_id: str
    boot_id: str
    arch: str
    kernel_release: str
    kernel_version: str
    cmdline: str
    cpu_model: str
    cpu_count: int
    memory_bytes: int
    # Per-policy cpufreq governors; empty where the kernel exposes no cpufreq (many VMs).
    governors: dict[str, str]
    loadavg: tuple[float, float, float]
    # Sysctls and sysfs knobs known to move benchmark results (autogroup, THP, clocksource...).
    sysctls: dict[str, str]
    sysfs: dict[str, str]
    target: str = "local"
    config_source: str | None = None
    # A VM target's facts: accelerator, the CPU model and memory the guest kernel sees.
    vm: dict[str, str] = field(default_factory=dict)
    # The CPUs the benchmark was pinned to (read back from the affinity), when pinned.
    pin: str | None = None
    # Tracing at the start of the run (system.tracing): tracer, tracing_on, enabled
    # events, probes, perf events of other processes. An enabled tracepoint slows every
    # pass through it, so two runs that differ here are not comparable as they stand.
    tracing: dict[str, str] = field(default_factory=dict)
    # `perfline tune`'s items as they stood at the run (system.tuning.states): item →
    # tuned/untuned, and what it read where that says more; the items this machine
    # cannot tune are left out.
    tuning: dict[str, str] = field(default_factory=dict)
    # How the machine came to run this kernel, when perfline booted it (target kexec):
    # `how` kexec, the kernel it came `from`, the registered `kernel` and its `image
    # sha256`. A kexec boot resets less than a cold one (docs/kexec.md): shown in compare.
    boot: dict[str, str] = field(default_factory=dict)
    # Kept out of the JSON form: the store keeps each distinct config once, by hash.
    kernel_config: str | None = field(default=None, repr=False, compare=False)

    @property
    def config_hash(self) -> str | None:
        if self.kernel_config is None:
            return None
        return hashlib.sha256(self.kernel_config.encode()).hexdigest()

    def with_applied(self, applied: Mapping[str, Mapping[str, str]]) -> Fingerprint:
        """This fingerprint with the knobs a case applied, as read back after applying
        (`tunables.read_back`): every sysctl and sysfs knob, not only the ones the
        fingerprint always reads, and the governors and pinning."""
        pin = applied.get("pin", {}).get("pin")
        return replace(
            self,
            sysctls={**self.sysctls, **applied.get("sysctl", {})},
            sysfs={**self.sysfs, **applied.get("sysfs", {})},
            governors={**self.governors, **applied.get("governor", {})},
            pin=self.pin if pin is None else pin,
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["kernel_config"]
        data["config_hash"] = self.config_hash
        data["loadavg"] = list(self.loadavg)
        return data


# Fields whose difference means the two sides ran on different hardware or hosts:
# a comparison across them measures the machines as much as the kernels.
MACHINE_FIELDS = ("hostname", "machine_id", "arch", "cpu_model", "cpu_count", "memory_bytes")
KERNEL_FIELDS = ("kernel_release", "kernel_version", "cmdline", "config_hash")
# The kernel parameter that tells the boot perfline asked for (target kexec): a new value
# every boot, so no difference between two runs.
BOOT_TOKEN_PARAM = "perfline.boot"
# How a side's description reads a fact its own runs do not agree on (comparison.Side).
MIXED = "mixed: "
# Differences in load at start below this (1-minute average) are ordinary noise.
LOAD_TOLERANCE = 0.5


@dataclass(frozen=True)
class Difference:
    key: str
    base: str
    other: str
    kind: str  # "machine", "kernel", "config", "setting" or "load"


def flatten(fingerprint: dict[str, Any]) -> dict[str, str]:
    """A stored fingerprint as `key → text`, one entry per comparable fact."""
    flat = {key: str(fingerprint.get(key)) for key in (*MACHINE_FIELDS, *KERNEL_FIELDS, "target")}
    if BOOT_TOKEN_PARAM in flat["cmdline"]:
        flat["cmdline"] = " ".join(word for word in flat["cmdline"].split()
                                   if word.partition("=")[0] != BOOT_TOKEN_PARAM)
    for policy, governor in fingerprint.get("governors", {}).items():
        flat[f"governor {policy}"] = governor
    for name, value in fingerprint.get("sysctls", {}).items():
        flat[f"sysctl {name}"] = value
    for path, value in fingerprint.get("sysfs", {}).items():
        flat[path] = value
    for key, value in fingerprint.get("vm", {}).items():
        flat[f"vm {key}"] = value
    for key, value in fingerprint.get("tracing", {}).items():
        flat[f"tracing {key}"] = value
    for key, value in fingerprint.get("tuning", {}).items():
        flat[f"tune {key}"] = value
    for key, value in fingerprint.get("boot", {}).items():
        flat[f"boot {key}"] = value
    if fingerprint.get("pin"):
        flat["pinned to CPUs"] = fingerprint["pin"]
    return flat


def differences(
    base: dict[str, str], other: dict[str, str], loads: tuple[float, float] | None = None
) -> list[Difference]:
    """What differs between two flattened descriptions (fingerprint, params, tunables)."""
    found = []
    for key in sorted(base.keys() | other.keys(), key=_order):
        a, b = base.get(key, "-"), other.get(key, "-")
        # A side whose own runs ran on different machines (or accelerators) measured the
        # machines too, even when the other side is mixed the same way.
        kind = _kind(key)
        mixed_machine = kind == "machine" and MIXED in (a[: len(MIXED)], b[: len(MIXED)])
        if key == "memory_bytes" and _one_machine_two_kernels(base, other):
            kind = "kernel"  # what each kernel leaves of the same RAM after its own reservations
        if a != b or mixed_machine:
            found.append(Difference(key, a, b, kind))
    if loads is not None and abs(loads[0] - loads[1]) > LOAD_TOLERANCE:
        found.append(Difference("load at start (1 min)", f"{loads[0]:.2f}", f"{loads[1]:.2f}", "load"))
    return found


def config_options(config: str) -> dict[str, str]:
    """CONFIG_X → value from a kernel .config; `# CONFIG_X is not set` → 'n'."""
    options = {}
    for line in config.splitlines():
        line = line.strip()
        if line.startswith("CONFIG_") and "=" in line:
            name, _, value = line.partition("=")
            options[name] = value
        elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
            options[line[2:].split()[0]] = "n"
    return options


def config_differences(base: str, other: str) -> list[Difference]:
    a, b = config_options(base), config_options(other)
    return [
        Difference(name, a.get(name, "n"), b.get(name, "n"), "config")
        for name in sorted(a.keys() | b.keys())
        if a.get(name, "n") != b.get(name, "n")
    ]


def _one_machine_two_kernels(base: dict[str, str], other: dict[str, str]) -> bool:
    """One machine (its machine id) booted into two kernels (target kexec)."""
    machine = base.get("machine_id")
    return (machine is not None and not machine.startswith(MIXED) and machine == other.get("machine_id")
            and base.get("kernel_release") != other.get("kernel_release"))


def _kind(key: str) -> str:
    # Emulated and virtualized CPUs differ by orders of magnitude: as different machines.
    if key in MACHINE_FIELDS or key == "vm accel":
        return "machine"
    if key in KERNEL_FIELDS:
        return "kernel"
    return "setting"


def _order(key: str) -> tuple[int, str]:
    rank = {"machine": 0, "kernel": 1}.get(_kind(key), 2)
    return rank, key
