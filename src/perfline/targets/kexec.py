"""The kexec target: this machine boots the kernel under test, and comes back.

Nothing here runs unless the machine's administrator opted in (machine_settings); the
checks come first and each says in one line what is missing. The boot itself is
`kexec -l IMAGE --initrd=... --append=...` and `systemctl kexec` (services stopped in
order, file systems synced); the tested kernel gets the default's command line plus
`panic=10 oops=panic`, so that a kernel that dies resets the machine, and the firmware,
whose default entry perfline never changes, brings the known-good kernel back.
`perfline.boot=TOKEN` on that command line tells the boot perfline asked for from any
other: a reset into the default kernel, or a boot someone else made.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfline.records.errors import UserError
from perfline.records.fingerprint import BOOT_TOKEN_PARAM
from perfline.system.process import CommandFailed, ToolMissing, require_tool, run, tail
from perfline.targets import local
from perfline.targets.kernels import Kernel, image_banner, sha256_of
from perfline.targets.machine_settings import OPT_IN, MachineSettings

KEXEC_PACKAGE = "kexec-tools"
BOOT_PARAM = BOOT_TOKEN_PARAM
# What the tested kernel always boots with; a job's `cmdline:` comes after and wins.
TESTED_PARAMS = ("panic=10", "oops=panic")
# Parameters of the default command line that a boot of another kernel must not inherit.
NOT_INHERITED = ("BOOT_IMAGE", "initrd", BOOT_PARAM, "panic", "oops")
RESUME_UNIT = "perfline-resume.service"
UNIT_DIR = Path("/etc/systemd/system")
# Where systemd-pstore (Storage=external, Debian's default) moves what it finds in pstore.
PSTORE_DIRS = ("sys/fs/pstore", "var/lib/systemd/pstore")
CONSOLE_LINES = 40


class KexecRefused(UserError):
    """This machine cannot or may not boot the kernel; the message says why and the fix."""


@dataclass(frozen=True)
class RunningKernel:
    """The kernel running now, as the checks after a boot read it."""

    release: str
    version: str  # /proc/sys/kernel/version: `#1 SMP PREEMPT_DYNAMIC ... (date)`
    cmdline: str
    boot_id: str

    @classmethod
    def read(cls, root: Path = Path("/")) -> RunningKernel:
        proc = root / "proc"
        return cls(_read(proc / "sys/kernel/osrelease"), _read(proc / "sys/kernel/version"),
                   _read(proc / "cmdline"), local.boot_id(root))

    def token(self) -> str | None:
        """The `perfline.boot=` this boot was asked for with, if any."""
        for word in self.cmdline.split():
            name, _, value = word.partition("=")
            if name == BOOT_PARAM:
                return value
        return None


@dataclass(frozen=True)
class BootImage:
    """A registered kernel as kexec boots it, and what identifies it once running."""

    name: str
    image: Path
    initrd: Path | None
    release: str
    banner: str  # the image header's `RELEASE (BUILDER) VERSION`
    sha256: str

    @classmethod
    def of(cls, kernel: Kernel, root: Path = Path("/")) -> BootImage:
        return cls(kernel.name, kernel.image, initrd_for(kernel, root), kernel.release,
                   image_banner(kernel.image), sha256_of(kernel.image))

    def mismatch(self, running: RunningKernel, token: str) -> str | None:
        """Why the running kernel is not this boot of this image; None when it is."""
        if running.token() != token:
            return (f"the machine runs {running.release}, not booted by perfline for this job "
                    f"({BOOT_PARAM}={token} is not on its command line)")
        if running.release != self.release:
            return f"the machine runs {running.release}, not {self.release}"
        if not self.banner.endswith(running.version):
            return f"{running.release} runs, but built as {running.version!r}, not as the image {self.banner!r}"
        return None


def require_opt_in(settings: MachineSettings) -> None:
    if not settings.kexec_allowed:
        raise KexecRefused(
            f"target kexec boots this machine into another kernel, and its administrator has not "
            f"allowed that: run `{OPT_IN}` on it as root (writes `kexec: allowed` here)", settings.path)


def require_resume_unit(settings: MachineSettings) -> None:
    """The unit that runs `perfline resume` after the boot: without it the job would never go on."""
    unit = settings.resume_unit
    if unit is None or not unit.is_file():
        where = "" if unit is None else f" ({unit} is gone)"
        raise KexecRefused(f"no resume unit{where}: run `perfline kernels install-resume` on this machine as "
                           "root, so that the job goes on after the boot", settings.path)


def require_boot_allowed(settings: MachineSettings) -> None:
    """The opt-in and the resume unit: what a command that boots this machine checks
    before it opens the store, so that a refusal changes nothing, not even a new store file."""
    require_opt_in(settings)
    require_resume_unit(settings)


def refusal(root: Path = Path("/")) -> str | None:
    """Why this kernel would refuse to load another one now; None when nothing is known to."""
    if _read(root / "proc/sys/kernel/kexec_load_disabled") == "1":
        return ("kexec is disabled until the next boot (/proc/sys/kernel/kexec_load_disabled is 1; "
                "a boot without it set is needed)")
    lockdown = _read(root / "sys/kernel/security/lockdown")
    if "[integrity]" in lockdown or "[confidentiality]" in lockdown:
        return (f"the kernel is locked down ({lockdown}): it loads only images signed with a trusted "
                "key (Secure Boot); sign the kernel under test or boot with Secure Boot off (docs/kexec.md)")
    return None


def initrd_for(kernel: Kernel, root: Path = Path("/")) -> Path | None:
    """The initramfs installed with the kernel's modules (/boot/initrd.img-RELEASE), as
    Debian's kernel packages and `make install` leave it; None for a kernel that needs
    none: one whose modules are installed without an initramfs, or one built without
    module support (its registered .config says `# CONFIG_MODULES is not set`: a
    tracker's build of bzImage alone, every driver the machine needs built in)."""
    initrd = root / "boot" / f"initrd.img-{kernel.release}"
    if initrd.is_file():
        return initrd
    if "# CONFIG_MODULES is not set" in (kernel.config() or ""):
        return None
    if not (root / "lib/modules" / kernel.release).is_dir():
        raise KexecRefused(
            f"kernel {kernel.name} ({kernel.release}) has no modules installed on this machine "
            f"(/lib/modules/{kernel.release}): install its package or `make modules_install install`, "
            "which also writes its initramfs, or build it with every driver built in (CONFIG_MODULES=n)")
    return None


def boot_cmdline(default: str, extra: str, token: str, watchdog: Sequence[str] = ()) -> str:
    """The default kernel's command line without what only that boot may have, then
    panic/oops, the watchdog's parameters (targets.watchdog), the token, and the job's
    own parameters (last, so they win)."""
    kept = [word for word in default.split() if word.partition("=")[0] not in NOT_INHERITED]
    return " ".join([*kept, *TESTED_PARAMS, *watchdog, f"{BOOT_PARAM}={token}", *extra.split()])


def load(image: BootImage, cmdline: str) -> None:
    """`kexec -l`: the kernel is staged; nothing changes until `execute`."""
    try:
        kexec = require_tool("kexec", KEXEC_PACKAGE)
    except ToolMissing as exc:
        raise KexecRefused(str(exc)) from None
    argv = [kexec, "-l", str(image.image), f"--append={cmdline}"]
    if image.initrd is not None:
        argv.append(f"--initrd={image.initrd}")
    try:
        run(argv, timeout=120)
    except CommandFailed as exc:
        raise KexecRefused(f"{shlex.join(argv)} was refused: {tail(exc.output_tail, 3)}") from None


def unload() -> None:
    """Drop a staged kernel, so that a later reboot is an ordinary one."""
    # Nothing staged, or no kexec: nothing to undo.
    with contextlib.suppress(ToolMissing, CommandFailed):
        run([require_tool("kexec", KEXEC_PACKAGE), "-u"], timeout=60)


def execute(how: str = "kexec") -> None:
    """Into the staged kernel, through systemd (services stopped, disks synced): `systemctl
    kexec`, or `systemctl reboot` into a one-shot boot entry (targets.boot_entry).

    systemd stops this process's own unit on the way down (SIGTERM, perhaps before
    `systemctl` has even returned): from here that signal waits, blocked, so that a boot
    under way is not taken for one that failed to start (which `start` would unstage and
    abandon); the process finishes what it says and exits. Unblocked again only when
    systemctl refused."""
    stopping = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stopping)
    try:
        run(["systemctl", how], timeout=120)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stopping)
        raise


def reboot() -> None:
    """Back to the firmware's default entry: an ordinary reboot."""
    run(["systemctl", "reboot"], timeout=120)


def console_lines(root: Path = Path("/"), lines: int = CONSOLE_LINES, planned_in: str | None = None
                  ) -> tuple[str, str]:
    """The last kernel messages of the previous boot, and where they came from: pstore
    (what a panicking kernel wrote there, newest record first), else the previous
    boot's journal; ('', '') when neither kept any. `planned_in`: the boot id the boot
    was planned in; a journal whose previous boot is that one holds nothing of the
    failed kernel (it died before its journald ran), only the default kernel's boot."""
    records = sorted((path for directory in PSTORE_DIRS if (root / directory).is_dir()
                      for path in (root / directory).rglob("dmesg-*") if path.is_file()),
                     key=lambda path: path.stat().st_mtime)
    if records:
        newest = records[-1]
        return str(newest), tail(newest.read_text(errors="replace"), lines)
    # Another root (a test's tree) has its own journal files, or none to read.
    where = [] if root == Path("/") else ["--directory", str(root / "var/log/journal")]
    if where and not (root / "var/log/journal").is_dir():
        return "", ""
    try:
        journal = run(["journalctl", *where, "-b", "-1", "-k", "-o", "short-monotonic", "-n", str(lines),
                       "--no-pager"], timeout=60).stdout
        last_entry = run(["journalctl", *where, "-b", "-1", "-o", "json", "-n", "1", "--no-pager"], timeout=60).stdout
    except (CommandFailed, FileNotFoundError):
        return "", ""
    if not journal.strip() or "No journal files were found" in journal or "-- No entries --" in journal:
        return "", ""
    if planned_in is not None and _journal_boot(last_entry) == planned_in.replace("-", ""):
        return "", ""
    return "journalctl -b -1 -k", tail(journal, lines)


def _journal_boot(entry: str) -> str | None:
    """The `_BOOT_ID` of a journal entry as `journalctl -o json` prints it."""
    try:
        found = json.loads(entry.strip().splitlines()[-1]).get("_BOOT_ID")
    except (ValueError, IndexError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def resume_unit_text(command: list[str], environment: dict[str, str]) -> str:
    """A oneshot run at every boot, after the network and systemd-pstore."""
    env = "".join(f"Environment={_unit_quote(f'{key}={value}')}\n" for key, value in sorted(environment.items()))
    return f"""\
[Unit]
Description=perfline: go on with the job a kexec boot was for (perfline resume)
Wants=network-online.target
After=network-online.target systemd-pstore.service time-sync.target

[Service]
Type=oneshot
{env}ExecStart={" ".join(_unit_quote(word) for word in command)}
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
"""


def _unit_quote(word: str) -> str:
    escaped = word.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"' if any(c.isspace() or c in "\"'\\;" for c in word) else escaped


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").replace("\0", " ").strip()
    except OSError:
        return ""
