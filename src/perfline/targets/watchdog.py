"""The watchdog that resets a tested kernel that hangs: a job's `watchdog: SECONDS`.

`panic=10` resets a kernel that knows it died; one that hangs needs a timer outside it.
From `kexec -e` until the reboot after `perfline resume`, the machine is guarded by:

- a hardware watchdog (`/sys/class/watchdog/watchdogN` with a parent device: iTCO_wdt,
  sp5100_tco, i6300esb, ...) that the default kernel's systemd arms for the kexec
  (`KExecWatchdogSec=`, `RebootWatchdogSec=` for `boot: reboot`) and leaves running,
  so that a tested kernel that hangs before its own systemd starts is reset; only if
  the watchdog core does not stop it at the kexec (most drivers ask it to; the default
  kernel booted with `watchdog.stop_on_reboot=0` keeps it running), which is read here;
- the tested kernel's systemd, told on its command line to take the device over and
  keep petting it (`systemd.watchdog_sec=N`, which also sets its reboot's timeout), and
  the kernel's watchdog core told not to pet a running one forever on its behalf
  (`watchdog.open_timeout=N`).

softdog is a timer of the running kernel: it does not survive the kexec, so with it only
the second half guards the boot. The setting for the kexec is a drop-in of systemd's
manager configuration in /run (`systemctl daemon-reexec` reads it): any boot, reset or
kexec clears /run, and a boot that does not start removes it (journaled first, so a
crashed perfline's is removed by the next perfline command).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from perfline.records.errors import UserError
from perfline.system.journal import Entry
from perfline.system.kernel_state import KernelState

SYSFS = Path("sys/class/watchdog")
# softdog's identity (drivers/watchdog/softdog.c); any other device with a parent is hardware.
SOFTDOG_IDENTITY = "Software Watchdog"
DROP_IN = Path("run/systemd/system.conf.d/50-perfline-watchdog.conf")
STOP_ON_REBOOT = Path("sys/module/watchdog/parameters/stop_on_reboot")
MODULES_LOAD = ("etc/modules-load.d", "run/modules-load.d", "usr/lib/modules-load.d", "lib/modules-load.d")
# Below this, a tested kernel that boots slowly would be reset before its systemd took over.
MIN_SECONDS = 30
DEFAULT_DEVICE = "/dev/watchdog0"
# WDIOF_CARDRESET in a device's bootstatus (linux/watchdog.h): it reset the machine last time.
CARD_RESET = 0x0020


class WatchdogRefused(UserError):
    """The job asks for a watchdog this machine cannot give; the message says why and the fix."""


@dataclass(frozen=True)
class Watchdog:
    """A watchdog device as /sys/class/watchdog shows it."""

    name: str  # watchdog0
    identity: str
    driver: str | None  # the parent device's driver; None for softdog, which has no parent
    max_timeout: int | None

    @property
    def device(self) -> str:
        return f"/dev/{self.name}"

    @property
    def hardware(self) -> bool:
        return self.identity != SOFTDOG_IDENTITY


@dataclass(frozen=True)
class Guard:
    """The watchdog a boot is guarded by, how long, and whether it is armed across the boot."""

    watchdog: Watchdog
    seconds: int
    how: str  # kexec, or reboot
    across: bool  # armed before the machine goes down and still running in the tested kernel

    def params(self) -> list[str]:
        """What the tested kernel's command line gets: its systemd takes the device over."""
        words = [f"systemd.watchdog_sec={self.seconds}"]
        if self.watchdog.device != DEFAULT_DEVICE:
            words.append(f"systemd.watchdog_device={self.watchdog.device}")
        if self.watchdog.hardware:
            words.append(f"watchdog.open_timeout={self.seconds}")
        return words

    def drop_in(self) -> str:
        """The default kernel's systemd configuration for this boot: the watchdog armed
        when it goes down (`KExecWatchdogSec=`, or `RebootWatchdogSec=` for a reboot)."""
        key = "KExecWatchdogSec" if self.how == "kexec" else "RebootWatchdogSec"
        device = "" if self.watchdog.device == DEFAULT_DEVICE else f"WatchdogDevice={self.watchdog.device}\n"
        return (f"# perfline: the watchdog of one boot under test (docs/kexec.md); /run is cleared by the boot\n"
                f"[Manager]\n{key}={self.seconds}s\n{device}")

    def describe(self) -> str:
        """Which watchdog guards the boot and from when, in one line (the boot's record)."""
        what = self.watchdog.identity + (f" ({self.watchdog.driver}, {self.watchdog.device})"
                                         if self.watchdog.driver else f" ({self.watchdog.device})")
        if self.across:
            return (f"{what}, {self.seconds} s: armed across the {self.how} and kept by the tested kernel's "
                    "systemd until the reboot after `perfline resume`")
        return f"{what}, {self.seconds} s, from the tested kernel's systemd on; {self.not_covered()}"

    def not_covered(self) -> str:
        if not self.watchdog.hardware:
            why = "softdog is a timer of the running kernel and does not survive the " + self.how
        elif self.how == "reboot":
            why = "the firmware's reset may stop it"
        else:
            why = ("the watchdog core may stop it at the kexec (the default kernel runs without "
                   "watchdog.stop_on_reboot=0)")
        return (f"not covered: a hang before the tested kernel's systemd starts ({why}; panic=10 still "
                "covers panics)")


def devices(root: Path = Path("/")) -> list[Watchdog]:
    """The watchdog devices of the running kernel, in their number's order."""
    directory = root / SYSFS
    if not directory.is_dir():
        return []
    found = []
    for entry in sorted(directory.glob("watchdog*"), key=lambda path: int(re.sub(r"\D", "", path.name) or 0)):
        driver_link = entry / "device" / "driver"
        driver = driver_link.resolve().name if driver_link.exists() else None
        maximum = _read(entry / "max_timeout")
        found.append(Watchdog(entry.name, _read(entry / "identity") or "unknown watchdog", driver,
                              int(maximum) if maximum.isdigit() else None))
    return found


def guard(seconds: int, how: str, root: Path = Path("/")) -> Guard:
    """The watchdog for a boot of `seconds` (a hardware one first), each missing thing a
    WatchdogRefused that says which and the fix; nothing is changed here."""
    found = devices(root)
    if not found:
        raise WatchdogRefused(
            f"the job asks for `watchdog: {seconds}`, and this machine has no watchdog device "
            f"(/{SYSFS} is empty): load its hardware watchdog's driver (iTCO_wdt, sp5100_tco, ...) or softdog "
            "(`modprobe softdog`, and list it in /etc/modules-load.d/ so the tested kernel loads it too), or "
            "drop `watchdog:` from the job")
    chosen = next((one for one in found if one.hardware), found[0])
    if chosen.max_timeout is not None and seconds > chosen.max_timeout:
        raise WatchdogRefused(f"`watchdog: {seconds}` is longer than {chosen.identity} ({chosen.device}) can "
                              f"count: at most {chosen.max_timeout} s")
    if not chosen.hardware and not _loaded_at_boot("softdog", root):
        raise WatchdogRefused(
            "the only watchdog is softdog, loaded now but not at boot: the tested kernel would come up "
            "without it; list it in /etc/modules-load.d/softdog.conf (a line `softdog`)")
    across = chosen.hardware and how == "kexec" and _read(root / STOP_ON_REBOOT) == "0"
    return Guard(chosen, seconds, how, across)


def reset_by(root: Path = Path("/")) -> str | None:
    """Which watchdog says it reset the machine before this boot (its bootstatus has
    WDIOF_CARDRESET, as drivers that can tell set it: i6300esb, iTCO_wdt, ...); None when none does."""
    for one in devices(root):
        status = _read(root / SYSFS / one.name / "bootstatus")
        if status.isdigit() and int(status) & CARD_RESET:
            return f"{one.identity} ({one.device})"
    return None


def arm(armed: Guard, state: KernelState, root: Path = Path("/")) -> Entry:
    """The default kernel's systemd arms the watchdog when it goes down for this boot.
    Journaled first: the entry removes the drop-in and re-executes systemd again."""
    return state.systemd_drop_in(root / DROP_IN, armed.drop_in())


def _loaded_at_boot(module: str, root: Path) -> bool:
    """Whether a modules-load.d file (or /etc/modules) names the module."""
    files = [path for directory in MODULES_LOAD for path in sorted((root / directory).glob("*.conf"))]
    files.append(root / "etc/modules")
    for path in files:
        for line in _read(path).splitlines():
            if line.split("#", 1)[0].strip() == module:
                return True
    return False


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""
