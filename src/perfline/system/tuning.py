"""A quiet machine on request: what `perfline tune` changes, what it only checks, and
what this machine lacks.

The list is pyperf's `system tune` (and rustc-perf's, MMTests'): cpufreq governor
`performance`, the minimum frequency raised to the maximum, turbo off, interrupts moved
off the benchmark's CPUs (irqbalance would move them back), perf's sampling rate capped
at 1 Hz (its sampling interrupts stop), the NMI watchdog off; isolcpus, nohz_full and
rcu_nocbs are boot parameters and only checked. Every change goes through
`system.kernel_state` (journal first), so a killed perfline's changes are put back by
the next command. Every item says why it cannot be tuned where it cannot (a VM without
cpufreq, a kernel without nohz_full), and nothing here writes unless `apply` is called.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from perfline.system.cpus import format_cpu_list, parse_cpu_list
from perfline.system.files import read_or_empty, write_durably
from perfline.system.journal import Entry
from perfline.system.kernel_state import KernelState, KernelStateError, undo

CPU = Path("/sys/devices/system/cpu")
PROC = Path("/proc")
TUNED, UNTUNED, UNAVAILABLE = "tuned", "untuned", "unavailable"
# The file `perfline tune` keeps its changes in until `perfline tune --reset`: a
# finished tune outlives its process on purpose, so its entries leave the process's
# journal (which the next command would restore) for this file, which it does not read.
TUNED_FILE = "tuned.json"


@dataclass(frozen=True)
class Item:
    """One thing tuning sets or checks. `changes`: the files still to be written and the
    value each gets (empty when tuned or when it cannot be changed); `reason`: why it
    cannot be tuned here, or what a check found."""

    name: str
    state: str  # TUNED, UNTUNED or UNAVAILABLE
    detail: str
    changes: tuple[tuple[Path, str], ...] = ()
    # Boot parameters: read only, a reboot with them changes them.
    check_only: bool = False
    # What it reads now, in short, where `state` alone hides a part (an interrupt the
    # kernel will not move leaves the item untuned before and after a tune).
    reading: str = ""


@dataclass(frozen=True)
class Places:
    """Where the items live; tests point them at a captured tree."""

    cpu: Path = CPU
    proc: Path = PROC


def online_cpus(places: Places = Places()) -> set[int]:
    text = read_or_empty(places.cpu / "online")
    return parse_cpu_list(text) if text else set(range(os.cpu_count() or 1))


def benchmark_cpus(given: str | None, places: Places = Places()) -> set[int]:
    """The CPUs the benchmark runs on: `given` (a cpulist), else the isolated ones
    (isolcpus=), else none (then interrupts are not moved: there is no "elsewhere")."""
    if given:
        return parse_cpu_list(given)
    return parse_cpu_list(read_or_empty(places.cpu / "isolated"))


def plan(cpus: set[int], places: Places = Places(), keep_sampling: bool = False) -> list[Item]:
    """Every item, as it stands now, with the writes that would tune it.
    `keep_sampling`: a perf-profile monitor samples in this run, so the sampling rate
    stays as it is."""
    return [
        _governor(cpus, places),
        _min_freq(cpus, places),
        _turbo(places),
        _irqs(cpus, places),
        _irqbalance(places),
        _sample_rate(places, keep_sampling),
        _nmi_watchdog(places),
        *_boot_checks(cpus, places),
    ]


def states(items: Sequence[Item]) -> dict[str, str]:
    """Item → tuned/untuned, for the fingerprint: what this machine could tune, as it
    was at the run (items it has no means for are left out: they never differ)."""
    return {item.name: f"{item.state}: {item.reading}" if item.reading else item.state
            for item in items if item.state != UNAVAILABLE}


def apply(items: Sequence[Item], kernel: KernelState) -> tuple[list[Entry], list[str]]:
    """Write every pending change, each journaled first; the entries that undo them and
    one line per file the kernel refused (a managed interrupt's affinity, say), which is
    left as it was and the rest goes on."""
    pending = [change for item in items for change in item.changes]
    entries = kernel.hold(pending)
    written, refused = [], []
    for entry in entries:
        try:
            kernel.write(Path(entry.path), entry.new)
            written.append(entry)
        except KernelStateError as exc:
            kernel.release([entry])
            refused.append(f"{entry.path}: {exc.reason}")
    return written, refused


# -- a tune that outlives its process (`perfline tune`, undone by `--reset`) ------------


def keep(directory: Path, boot_id: str, entries: list[Entry], kernel: KernelState) -> None:
    """Move `entries` from this process's journal to the tuned file: the file first
    (fsync'd), then the journal forgets them; a kill between the two leaves both, and
    the next command's restore and a later reset write the same old values."""
    kept = kept_entries(directory, boot_id)
    write_durably(directory / TUNED_FILE, json.dumps({"boot_id": boot_id,
                                                       "entries": [asdict(e) for e in kept + entries]}))
    kernel.release(entries)


def kept_entries(directory: Path, boot_id: str) -> list[Entry]:
    """What `perfline tune` changed and no reset has undone; [] after a reboot (the
    boot reset every value)."""
    path = directory / TUNED_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if data.get("boot_id") != boot_id:
        path.unlink(missing_ok=True)
        return []
    return [Entry(**entry) for entry in data["entries"]]


def reset(directory: Path, boot_id: str) -> tuple[list[Entry], list[Entry]]:
    """Undo what `perfline tune` changed, newest first: (restored, failed). The file
    stays with the failures, for another reset."""
    entries = kept_entries(directory, boot_id)
    failures = undo(entries)
    path = directory / TUNED_FILE
    if failures:
        write_durably(path, json.dumps({"boot_id": boot_id, "entries": [asdict(e) for e in failures]}))
    else:
        path.unlink(missing_ok=True)
    return [e for e in entries if e not in failures], failures


# -- the items ---------------------------------------------------------------------------


def _policies(cpus: set[int], places: Places) -> list[Path]:
    """cpufreq policies governing any of `cpus` (every policy when `cpus` is empty)."""
    found = []
    for policy in sorted((places.cpu / "cpufreq").glob("policy*")):
        affected = parse_cpu_list(read_or_empty(policy / "affected_cpus").replace(" ", ","))
        if not cpus or affected & cpus:
            found.append(policy)
    return found


NO_CPUFREQ = ("no cpufreq policy in {0}/cpufreq: the kernel does not control this CPU's frequency "
              "(a VM's virtual CPUs run at whatever the host gives them)")


def _governor(cpus: set[int], places: Places) -> Item:
    policies = _policies(cpus, places)
    if not policies:
        return Item("governor", UNAVAILABLE, NO_CPUFREQ.format(places.cpu))
    changes = []
    for policy in policies:
        if "performance" not in read_or_empty(policy / "scaling_available_governors").split():
            return Item("governor", UNAVAILABLE, f"{policy.name} offers no performance governor")
        if read_or_empty(policy / "scaling_governor") != "performance":
            changes.append((policy / "scaling_governor", "performance"))
    return _item("governor", changes, f"performance on {len(policies)} cpufreq policies")


def _min_freq(cpus: set[int], places: Places) -> Item:
    policies = _policies(cpus, places)
    if not policies:
        return Item("min freq", UNAVAILABLE, NO_CPUFREQ.format(places.cpu))
    changes = []
    for policy in policies:
        highest = read_or_empty(policy / "cpuinfo_max_freq")
        if not highest:
            return Item("min freq", UNAVAILABLE, f"{policy.name} has no cpuinfo_max_freq")
        if read_or_empty(policy / "scaling_min_freq") != highest:
            changes.append((policy / "scaling_min_freq", highest))
    return _item("min freq", changes, "the minimum frequency raised to the maximum (no ramp-up)")


def _turbo(places: Places) -> Item:
    no_turbo, boost = places.cpu / "intel_pstate/no_turbo", places.cpu / "cpufreq/boost"
    if no_turbo.exists():
        return _item("turbo", [(no_turbo, "1")] if read_or_empty(no_turbo) != "1" else [],
                     "off (intel_pstate/no_turbo = 1)")
    if boost.exists():
        return _item("turbo", [(boost, "0")] if read_or_empty(boost) != "0" else [], "off (cpufreq/boost = 0)")
    return Item("turbo", UNAVAILABLE, f"no turbo control: neither {no_turbo} nor {boost} exists")


def _irqs(cpus: set[int], places: Places) -> Item:
    online = online_cpus(places)
    if not cpus:
        return Item("irq affinity", UNAVAILABLE,
                    "no benchmark CPUs: give --cpus (or pin:), or boot with isolcpus=, to move interrupts off them")
    rest = online - cpus
    if not rest:
        return Item("irq affinity", UNAVAILABLE,
                    f"the benchmark CPUs {format_cpu_list(cpus)} are every online CPU: no other CPU takes interrupts")
    target = format_cpu_list(rest)
    lines = sorted((places.proc / "irq").glob("*/smp_affinity_list"), key=lambda p: int(p.parent.name))
    changes = [(path, target) for path in lines if parse_cpu_list(read_or_empty(path)) & cpus]
    on_them = len(changes)
    default = places.proc / "irq/default_smp_affinity"
    mask = f"{sum(1 << cpu for cpu in rest):x}"
    if default.exists() and int(read_or_empty(default).replace(",", "") or "0", 16) & sum(1 << c for c in cpus):
        changes.append((default, mask))
    item = _item("irq affinity", changes, f"interrupts on CPUs {target}, off the benchmark's {format_cpu_list(cpus)}")
    # Some lines refuse (a managed interrupt: a virtio-blk queue here), so the count,
    # not the state alone, tells a tuned machine from an untuned one.
    return replace(item, reading=f"{on_them} of {len(lines)} interrupt lines may run on CPUs {format_cpu_list(cpus)}")


def _irqbalance(places: Places) -> Item:
    pids = [proc.name for proc in places.proc.glob("[0-9]*") if read_or_empty(proc / "comm") == "irqbalance"]
    if not pids:
        return Item("irqbalance", TUNED, "not running: nothing moves interrupts back")
    return Item("irqbalance", UNTUNED,
                f"irqbalance (pid {', '.join(pids)}) moves interrupts back onto the benchmark CPUs; perfline does "
                "not stop services: `systemctl stop irqbalance` (start it again after), then tune")


def _sample_rate(places: Places, keep_sampling: bool) -> Item:
    path = places.proc / "sys/kernel/perf_event_max_sample_rate"
    if not path.exists():
        return Item("perf sample rate", UNAVAILABLE, f"{path} does not exist (a kernel without perf events)")
    if keep_sampling:
        return Item("perf sample rate", UNAVAILABLE, "left as it is: the perf-profile monitor samples in this run")
    rate = read_or_empty(path)
    return replace(_item("perf sample rate", [(path, "1")] if rate != "1" else [],
                         "perf_event_max_sample_rate = 1 (no sampling interrupts from other perf users)"), reading=rate)


def _nmi_watchdog(places: Places) -> Item:
    path = places.proc / "sys/kernel/nmi_watchdog"
    if not path.exists():
        return Item("nmi watchdog", UNAVAILABLE, f"{path} does not exist (a kernel without the hard lockup detector)")
    return _item("nmi watchdog", [(path, "0")] if read_or_empty(path) != "0" else [],
                 "off (kernel.nmi_watchdog = 0: no periodic NMI, and its perf counter is free)")


def _boot_checks(cpus: set[int], places: Places) -> list[Item]:
    """isolcpus, nohz_full and rcu_nocbs: boot parameters, so only checked."""
    cmdline = read_or_empty(places.proc / "cmdline").split()
    shown = format_cpu_list(cpus) if cpus else "CPUS"
    found = []
    for name, source in (("isolcpus", places.cpu / "isolated"), ("nohz_full", places.cpu / "nohz_full"),
                         ("rcu_nocbs", None)):
        if source is not None and not source.exists():
            found.append(Item(name, UNAVAILABLE, f"{source} does not exist: this kernel was built without it",
                              check_only=True))
            continue
        if source is not None:
            covered = parse_cpu_list(read_or_empty(source))
        else:
            given = [word.partition("=")[2] for word in cmdline if word.startswith("rcu_nocbs=")]
            covered = parse_cpu_list(given[0]) if given and given[0] and given[0][0].isdigit() else set()
        if covered and (not cpus or cpus <= covered):
            found.append(Item(name, TUNED, f"CPUs {format_cpu_list(covered)}", check_only=True))
        else:
            now = f"CPUs {format_cpu_list(covered)}" if covered else "not set"
            found.append(Item(name, UNTUNED, f"{now}; a boot parameter: boot with {name}={shown}",
                              check_only=True))
    return found


def _item(name: str, changes: list[tuple[Path, str]], detail: str) -> Item:
    return Item(name, UNTUNED if changes else TUNED, detail, tuple(changes))


@contextmanager
def tuned(cpus: set[int], kernel: KernelState, keep_sampling: bool = False) -> Iterator[list[str]]:
    """The machine tuned for a run (`tune: true`), put back as it was on exit; yields
    the refusals. What is tuned already (by `perfline tune`, or the other side of an
    interleaved run) is not journaled again, so the run leaves it tuned."""
    entries, refused = apply(plan(cpus, keep_sampling=keep_sampling), kernel)
    try:
        yield refused
    finally:
        if failures := kernel.restore(entries):
            raise KernelStateError(Path(failures[0].path), "could not restore its old value; "
                                   "`perfline restore` will retry")
