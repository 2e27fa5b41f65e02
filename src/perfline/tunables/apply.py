"""Applying tunables around a run and putting the old values back, also after a crash."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from perfline.records.job import ParamValue
from perfline.tunables.journal import Entry, Journal, leftovers

PROC_SYS = Path("/proc/sys")
CPUFREQ = Path("/sys/devices/system/cpu/cpufreq")
LOCKDOWN = Path("/sys/kernel/security/lockdown")


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


def read_value(path: Path) -> str:
    """The current value; for `a [b] c` selection files, the selected word."""
    text = path.read_text().strip()
    selected = re.search(r"\[([^\]]+)\]", text)
    return selected.group(1) if selected else text


@contextmanager
def applied(
    tunables: Mapping[str, Mapping[str, ParamValue]], journal: Journal
) -> Iterator[dict[str, str]]:
    """Set every knob, yield `{knob: "old→new"}`, and restore in reverse order on exit.

    The old values reach the journal (fsync'd) before the first write. If any knob
    cannot be set, the ones already set are restored and TunableError names the knob.
    """
    planned = knobs(tunables)
    entries = [Entry(str(k.path), _read(k), k.value) for k in planned]
    journal.record(entries)
    written: list[Entry] = []
    try:
        for knob, entry in zip(planned, entries, strict=True):
            _write(knob.path, knob.value, knob.name)
            written.append(entry)
        with pinned(tunables.get("pin", {}).get("pin")) as cpus:
            changes = {k.name: f"{e.old}→{read_value(k.path)}" for k, e in zip(planned, entries, strict=True)}
            if cpus is not None:
                changes["pin"] = cpus
            yield changes
    finally:
        failures = restore(written)
        journal.forget([e for e in entries if e not in failures])
        if failures:
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


def parse_cpu_list(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def format_cpu_list(cpus: set[int]) -> str:
    """{0, 1, 2, 5} → `0-2,5`, the kernel's cpulist form."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def restore(entries: list[Entry]) -> list[Entry]:
    """Write the old values back, newest change first; returns the entries that failed."""
    failures = []
    for entry in reversed(entries):
        try:
            _write(Path(entry.path), entry.old, entry.path)
        except TunableError:
            failures.append(entry)
    return failures


def restore_leftovers(
    directory: Path, boot_id: str, alive: Callable[[int], bool]
) -> list[str]:
    """Restore what crashed perfline processes left changed; one message per value."""
    messages = []
    for path, entries in leftovers(directory, boot_id, alive):
        failures = restore(entries)
        for entry in entries:
            verb = "could not restore" if entry in failures else "restored"
            messages.append(f"{verb} {entry.path} to {entry.old!r} (left at {entry.new!r} by a crashed run)")
        if not failures:
            path.unlink(missing_ok=True)
    return messages


def _read(knob: Knob) -> str:
    try:
        return read_value(knob.path)
    except FileNotFoundError:
        raise TunableError(f"{knob.name}: no such knob ({knob.path} does not exist)") from None
    except OSError as exc:
        raise TunableError(f"{knob.name}: cannot read {knob.path}: {exc.strerror}") from None


def _write(path: Path, value: str, name: str) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(value)
    except OSError as exc:
        raise TunableError(f"{name}: {_reason(exc, value)}") from None


def _reason(exc: OSError, value: str) -> str:
    if exc.errno == errno.EPERM:
        return f"the kernel refused the write (EPERM{_lockdown()})"
    if exc.errno in (errno.EACCES, errno.EROFS):
        return "read-only: it cannot be changed at run time (EACCES)"
    if exc.errno == errno.EINVAL:
        return f"the kernel rejected the value {value!r} (EINVAL)"
    if exc.errno == errno.ENOENT:
        return "no such knob"
    return f"{exc.strerror} (errno {exc.errno})"


def _lockdown() -> str:
    try:
        mode = re.search(r"\[(\w+)\]", LOCKDOWN.read_text())
    except OSError:
        return ""
    return f"; kernel lockdown: {mode.group(1)}" if mode and mode.group(1) != "none" else ""


def _text(value: ParamValue) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
