"""Applying tunables around a run and putting the old values back, also after a crash
(through `system.kernel_state`, the journal every change to the kernel goes through)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from perfline.records.job import ParamValue
from perfline.system.cpus import format_cpu_list, parse_cpu_list
from perfline.system.kernel_state import KernelState, KernelStateError, read_restorable

PROC_SYS = Path("/proc/sys")
CPUFREQ = Path("/sys/devices/system/cpu/cpufreq")


class TunableError(RuntimeError):
    """A knob could not be read or set; the message names it and the reason."""


@dataclass(frozen=True)
class Knob:
    kind: str
    key: str
    path: Path
    value: str

    @property
    def name(self) -> str:
        return f"{self.kind} {self.key}"


def knobs(tunables: Mapping[str, Mapping[str, ParamValue]]) -> list[Knob]:
    """The files to write for a case's tunables (`pin` is not a file; see `pinned`)."""
    found = []
    for kind, values in tunables.items():
        for key, value in values.items():
            text = _text(value)
            if kind == "sysctl":
                found.append(Knob(kind, key, PROC_SYS / key.replace(".", "/"), text))
            elif kind == "sysfs":
                found.append(Knob(kind, key, Path(key), text))
            elif kind == "governor":
                policies = sorted(CPUFREQ.glob("policy*/scaling_governor"))
                if not policies:
                    raise TunableError(
                        f"governor {text}: this system has no cpufreq policies under {CPUFREQ} "
                        "(common in VMs); remove the governor tunable"
                    )
                found += [Knob(kind, p.parent.name, p, text) for p in policies]
    return found


def check_available(tunables: Mapping[str, Mapping[str, ParamValue]]) -> None:
    """Without changing anything: every knob exists and a pin names CPUs this process
    may use. TunableError names the first that does not."""
    for knob in knobs(tunables):  # a governor without cpufreq fails here
        if not knob.path.exists():
            raise TunableError(
                f"{knob.name}: no such knob ({knob.path} does not exist; see what "
                f"{knob.path.parent} holds)"
            )
    pin = tunables.get("pin", {}).get("pin")
    if pin is not None:
        usable = os.sched_getaffinity(0)
        if missing := parse_cpu_list(str(pin)) - usable:
            raise TunableError(
                f"pin {pin}: CPU {format_cpu_list(missing)} cannot be used here; "
                f"usable CPUs: {format_cpu_list(usable)}"
            )


def read_back(tunables: Mapping[str, Mapping[str, ParamValue]]) -> dict[str, dict[str, str]]:
    """What a case's knobs read now, for the fingerprint, after `applied` set them:
    {"sysctl": {name: text}, "sysfs": {path: text}, "governor": {policy: name},
    "pin": {"pin": CPU list}}. Whole file text as the fingerprint reads its own knobs
    (`always [madvise] never`), so a knob reads the same whether a case sets it or not."""
    found: dict[str, dict[str, str]] = {}
    for knob in knobs(tunables):
        try:
            text = knob.path.read_text(errors="replace").replace("\0", " ").strip()
        except OSError:
            continue
        found.setdefault(knob.kind, {})[knob.key] = text
    if tunables.get("pin"):
        found["pin"] = {"pin": format_cpu_list(os.sched_getaffinity(0))}
    return found


@contextmanager
def applied(
    tunables: Mapping[str, Mapping[str, ParamValue]], kernel: KernelState
) -> Iterator[dict[str, str]]:
    """Set every knob, yield `{knob: "old→new"}`, and restore in reverse order on exit.

    The old values reach the journal (fsync'd) before the first write. If any knob
    cannot be set, the ones already set are restored and TunableError names the knob.
    """
    planned = knobs(tunables)
    by_path = {str(k.path): k for k in planned}
    try:
        entries = kernel.set([(k.path, k.value) for k in planned])
    except KernelStateError as exc:
        knob = by_path.get(str(exc.path))
        name = knob.name if knob else str(exc.path)
        if exc.reason == "no such file":
            raise TunableError(f"{name}: no such knob ({exc.path} does not exist)") from None
        raise TunableError(f"{name}: {exc.reason}") from None
    try:
        with pinned(tunables.get("pin", {}).get("pin")) as cpus:
            changes = {k.name: f"{e.old}→{read_restorable(k.path)}" for k, e in zip(planned, entries, strict=True)}
            if cpus is not None:
                changes["pin"] = cpus
            yield changes
    finally:
        if failures := kernel.restore(entries):
            raise TunableError(
                "could not restore " + ", ".join(f"{e.path} to {e.old!r}" for e in failures)
                + "; `perfline restore` will retry"
            )


@contextmanager
def pinned(cpus: ParamValue | None) -> Iterator[str | None]:
    """Restrict perfline (and so every benchmark process it starts) to a CPU list."""
    if cpus is None:
        yield None
        return
    wanted = parse_cpu_list(str(cpus))
    previous = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, wanted)
    except OSError as exc:
        raise TunableError(f"pin {cpus}: {exc.strerror}; usable CPUs: {sorted(previous)}") from None
    try:
        yield str(cpus)
    finally:
        os.sched_setaffinity(0, previous)


def _text(value: ParamValue) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
