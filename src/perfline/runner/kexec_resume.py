"""Target kexec across the boot: what `run --target kexec` writes before the machine goes
down, and what `perfline resume` (a unit, at every boot) makes of it afterwards.

A boot moves through the store (store.kexec_boots): `pending` is written after the kernel
is staged (`kexec -l`) and before `systemctl kexec`; on the next boot, resume compares
the running kernel with the one asked for (the boot's token on the command line, the
release, the build's version string, a new boot id). The right one: `booted`, the cases
are measured and stored with its fingerprint, `measured`, and the machine reboots into
its firmware's default. Any other kernel means the tested one did not come up or died
(panic=10, a watchdog, someone's reset): `boot-failed`, with what pstore or the previous
boot's journal kept of its console. Back on the default kernel, `returned`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from perfline.records.fingerprint import Fingerprint
from perfline.records.job import Case, case_from_json, case_to_json
from perfline.store import Store
from perfline.store.kexec_boots import KexecBoot, PlannedBoot
from perfline.system.journal import own_journal
from perfline.system.kernel_state import KernelState
from perfline.system.process import CommandFailed, ToolMissing
from perfline.targets import boot_entry, kexec, local, watchdog
from perfline.targets.kernels import get_kernel
from perfline.targets.machine_settings import MachineSettings

# The machine's own boot steps; tests of the logic pass their own, and only a guest runs these.
Step = Callable[[], None]
Stage = Callable[[kexec.BootImage, str], None]


@dataclass(frozen=True)
class BootMethod:
    """How the machine gets into the kernel: stage it, undo the staging, go down."""

    how: str  # kexec, or reboot (the boot loader's one-shot entry)
    stage: Stage
    unstage: Step
    go: Step


class MachineBooting(Exception):  # not an error: the machine goes down as asked
    """The machine is booting a kernel for the work under way (a fleet job, a bisection's
    probe): the process stops there; `perfline resume` goes on after the boot."""

    def __init__(self, boot: KexecBoot) -> None:
        super().__init__(f"kexec boot {boot.id} into {boot.kernel}")
        self.boot = boot


@dataclass(frozen=True)
class BootSteps:
    """How this machine stages and boots a kernel, and where its /proc and /etc are: the
    real ones on a lab machine; a test of the logic passes its own, so that nothing it
    runs boots the host it runs on. `reboot`: the one-shot entry's steps (None: GRUB's).
    `fleet_attempt`: the fleet job attempt the boots are for (a worker carrying a kernel
    tracker's confirmation or bisection over its boots, fleet.kernel_narrowing)."""

    root: Path = Path("/")
    stage: Stage = kexec.load
    boot: Step = kexec.execute
    reboot: BootMethod | None = None
    fleet_attempt: int | None = None


THIS_MACHINE = BootSteps()


def one_shot_entry(root: Path = Path("/")) -> BootMethod:
    """`boot: reboot`: GRUB's one-shot entry (targets.boot_entry), then `systemctl reboot`."""

    def stage(image: kexec.BootImage, cmdline: str) -> None:
        try:
            boot_entry.stage(image.release, f"perfline: {image.name} ({image.release})", image.initrd, cmdline,
                             root)
        except boot_entry.EntryRefused as exc:
            raise kexec.KexecRefused(exc.message) from None

    return BootMethod("reboot", stage, partial(boot_entry.remove, root), partial(kexec.execute, "reboot"))


@dataclass(frozen=True)
class Resumed:
    """What `perfline resume` found and did; `boot` is None when nothing was open."""

    outcome: str  # nothing, waiting, measured, boot-failed, returned
    message: str
    boot: KexecBoot | None = None
    # Back to the default kernel now: the caller says what happened first, then reboots.
    reboot: bool = False


@dataclass(frozen=True)
class Checked:
    """A boot that every check passed: what it boots, from what, and how."""

    image: kexec.BootImage
    extra: str  # the job's own kernel parameters
    running: kexec.RunningKernel
    machine_id: str
    how: str  # kexec, or reboot where kexec is refused and the job allows it
    refused: str | None  # why kexec is refused, when `how` is reboot
    guard: watchdog.Guard | None  # the watchdog the job asked for (`watchdog: SECONDS`)
    watchdog: str  # which watchdog guards the boot, as its record says it


def check(store: Store, cases: list[Case], settings: MachineSettings, root: Path = Path("/")) -> Checked:
    """Everything a boot of these cases needs, each missing thing a KexecRefused that says
    which; nothing is changed here."""
    kexec.require_boot_allowed(settings)
    kernels = {(case.boot_kernel, case.cmdline, case.watchdog) for case in cases}
    if len(kernels) != 1:
        raise kexec.KexecRefused("one kexec boot measures one kernel with one command line and one watchdog: this "
                                 f"job asks for {len(kernels)} ({', '.join(sorted(f'{k} {c!r}' for k, c, _ in kernels))})"
                                 "; split it")
    ((name, extra, seconds),) = kernels
    assert name is not None, "target kexec cases carry their kernel (jobs.vm.with_target)"
    machine_id = local.machine_id(root)
    already = store.open_kexec_boot(machine_id)
    if already is not None:
        raise kexec.KexecRefused(
            f"kexec boot {already.id} of this machine ({already.kernel}) is still {already.state}: "
            "`perfline resume` goes on with it; `perfline resume --abandon` gives it up")
    image = kexec.BootImage.of(get_kernel(name), root)
    how, reason = "kexec", kexec.refusal(root)
    if reason:
        if any(case.boot != "reboot" for case in cases):
            raise kexec.KexecRefused(f"{reason}; or let the job boot through the boot loader where kexec is "
                                     "refused: `boot: reboot` in the job (--boot reboot)")
        if why := boot_entry.refusal(image.release, image.sha256, root):
            raise kexec.KexecRefused(f"{reason}; and the job's `boot: reboot` cannot either: {why}")
        how = "reboot"
    guard, said = _watchdog(seconds, how, root)
    return Checked(image, extra, kexec.RunningKernel.read(root), machine_id, how, reason, guard, said)


def _watchdog(seconds: int | None, how: str, root: Path) -> tuple[watchdog.Guard | None, str]:
    """The job's watchdog, and what the boot's record says of it."""
    if seconds is None:
        return None, "none armed by perfline (the job has no `watchdog:`; the administrator's settings apply)"
    if seconds == 0:
        return None, "off (the job's `watchdog: off`; the administrator's settings apply)"
    try:
        guard = watchdog.guard(seconds, how, root)
    except watchdog.WatchdogRefused as exc:
        raise kexec.KexecRefused(exc.message) from None
    return guard, guard.describe()


def start(store: Store, cases: list[Case], settings: MachineSettings, *, label: str | None = None,
          kernel_commit: str | None = None, fleet_attempt: int | None = None, root: Path = Path("/"),
          stage: Stage = kexec.load, boot: Step = kexec.execute, reboot: BootMethod | None = None,
          series: tuple[int, int] | None = None) -> KexecBoot:
    """Check everything, stage the kernel, write the boot, then boot. Any check that
    fails is a KexecRefused and leaves nothing changed; a boot that fails to start is
    unstaged and `abandoned`. `fleet_attempt`: the worker's attempt at the fleet job the
    boot is for, which `perfline resume` ends. Where the running kernel refuses kexec
    and every case allows it (`boot: reboot`), the boot goes through `reboot` (GRUB's
    one-shot entry unless a test gives its own). `series`: (series id, block) of an ab
    over boots."""
    checked = check(store, cases, settings, root)
    method = BootMethod("kexec", stage, kexec.unload, boot)
    if checked.how == "reboot":
        method = reboot or one_shot_entry(root)
    image, running, guard = checked.image, checked.running, checked.guard
    token = secrets.token_hex(8)
    cmdline = kexec.boot_cmdline(running.cmdline, checked.extra, token, [] if guard is None else guard.params())
    method.stage(image, cmdline)
    state = KernelState(own_journal())
    armed = None
    if guard is not None:
        try:
            armed = watchdog.arm(guard, state, root)
        except (CommandFailed, ToolMissing, OSError) as exc:
            method.unstage()
            raise kexec.KexecRefused(f"systemd did not take the watchdog's setting for the boot: {exc}") from None

    def undo() -> None:
        method.unstage()
        if armed is not None:
            state.restore([armed])

    try:
        planned = store.plan_kexec_boot(PlannedBoot(
            machine_id=checked.machine_id, hostname=local.hostname(), kernel=image.name, release=image.release,
            banner=image.banner, sha256=image.sha256, cmdline=cmdline, token=token,
            default_release=running.release, cases=[case_to_json(case) for case in cases], label=label,
            kernel_commit=kernel_commit, boot_id_before=running.boot_id, fleet_attempt=fleet_attempt,
            how=method.how, series_id=None if series is None else series[0],
            series_step=None if series is None else series[1], watchdog=checked.watchdog))
    except BaseException:
        undo()
        raise
    try:
        method.go()
    except BaseException as exc:
        undo()
        store.update_kexec_boot(planned.id, "abandoned", error=f"the boot did not start: {exc}")
        raise
    if armed is not None:
        state.release([armed])  # the boot under way clears /run, the drop-in with it
    return planned


def resume(store: Store, measure: Callable[[list[Case], KexecBoot], list[int]], *,
           root: Path = Path("/")) -> Resumed:
    """After a boot: go on with this machine's open kexec boot, if it has one."""
    running = kexec.RunningKernel.read(root)
    boot = store.open_kexec_boot(local.machine_id(root))
    if boot is None:
        return Resumed("nothing", "no kexec boot of this machine is open: nothing to resume")
    if running.boot_id in (boot.boot_id_before, boot.boot_id_after) and boot.state != "booted":
        # Measured already in this boot (a resume run again before its reboot): reboot.
        return Resumed("waiting", f"kexec boot {boot.id} is {boot.state}; the machine has not booted since", boot,
                       reboot=boot.state == "measured")
    if boot.how == "reboot":
        boot_entry.remove(root)  # GRUB used it once; it must not stay for anyone to boot by hand
    if boot.state == "pending":
        image = kexec.BootImage(boot.kernel, Path(), None, boot.release, boot.banner, boot.sha256)
        problem = image.mismatch(running, boot.token)
        if problem is not None:
            return _failed(store, boot, running, root, f"{boot.kernel} did not boot: {problem}")
        boot = store.update_kexec_boot(boot.id, "booted", boot_id_after=running.boot_id)
        run_ids = measure([case_from_json(case) for case in boot.cases], boot)
        boot = store.update_kexec_boot(boot.id, "measured", run_ids=run_ids)
        return Resumed("measured", f"kexec boot {boot.id}: measured on {boot.release} (runs "
                       f"{', '.join(map(str, run_ids))}); rebooting into the default kernel", boot, reboot=True)
    if boot.state == "booted":
        if running.boot_id == boot.boot_id_after:
            return Resumed("waiting", f"kexec boot {boot.id} is being measured in this boot", boot)
        return _failed(store, boot, running, root,
                       f"the machine went down while measuring on {boot.release} (a panic, the watchdog or a reset)")
    # measured, and this is a later boot: the machine is back.
    note = None if running.release == boot.default_release else (
        f"came back on {running.release}, not the default {boot.default_release} it left")
    boot = store.update_kexec_boot(boot.id, "returned", error=note)
    return Resumed("returned", f"kexec boot {boot.id}: back on {running.release}" + (f"; {note}" if note else ""),
                   boot)


def abandon(store: Store, root: Path = Path("/")) -> KexecBoot | None:
    """Give up this machine's open boot (the administrator's decision), and the ab over
    boots it is a block of: no later resume boots its next block."""
    boot = store.open_kexec_boot(local.machine_id(root))
    if boot is None:
        return None
    if boot.series_id is not None and store.kexec_series(boot.series_id).state == "open":
        store.end_kexec_series(boot.series_id, "abandoned", f"kexec boot {boot.id} abandoned with "
                               "`perfline resume --abandon`")
    return store.update_kexec_boot(boot.id, "abandoned", error="abandoned with `perfline resume --abandon`")


def boot_fingerprint(fingerprint: Fingerprint, boot: KexecBoot) -> Fingerprint:
    """The booted kernel's fingerprint, saying how it was booted."""
    return replace(fingerprint, target="kexec", boot={
        "how": boot.how, "from": boot.default_release, "kernel": boot.kernel, "image sha256": boot.sha256,
        "watchdog": boot.watchdog or "not recorded",
    })


def _failed(store: Store, boot: KexecBoot, running: kexec.RunningKernel, root: Path, error: str) -> Resumed:
    source, lines = kexec.console_lines(root, planned_in=boot.boot_id_before)
    console = f"{source}:\n{lines}" if lines else None
    if console is None:
        error += "; no console lines were kept (no pstore record, no journal of that boot)"
    if (watched := watchdog.reset_by(root)) is not None:
        error += f"; the watchdog reset the machine ({watched} says so in its bootstatus)"
    boot = store.update_kexec_boot(boot.id, "boot-failed", boot_id_after=running.boot_id, console=console,
                                   error=error)
    return Resumed("boot-failed", f"kexec boot {boot.id}: {error}", boot)
