"""A one-shot boot entry: where kexec is refused and the job allows it (`boot: reboot`),
the machine boots the kernel under test once through GRUB, and its default again after.

perfline writes one menuentry (`--id perfline-boot`) in a block of its own in
/boot/grub/custom.cfg, which grub.cfg sources at boot time (Debian's
/etc/grub.d/41_custom), so neither `update-grub` nor a rewritten grub.cfg is needed.
`grub-reboot perfline-boot` sets GRUB's `next_entry` in grubenv; GRUB clears it before it
boots the entry, so whatever resets the machine afterwards (panic=10, a watchdog, the
reboot back) boots the default entry, which perfline never changes. After the boot,
`perfline resume` removes the block (`remove`), and so does a boot that never started.
"""

from __future__ import annotations

import re
from pathlib import Path

from perfline.records.errors import UserError
from perfline.system.files import write_durably
from perfline.system.process import CommandFailed, ToolMissing, require_tool, run, tail
from perfline.targets.kernels import sha256_of

GRUB_DIR = Path("boot/grub")
ENTRY_ID = "perfline-boot"
BEGIN = "### BEGIN perfline one-shot entry (perfline resume removes it)"
END = "### END perfline one-shot entry"
GRUB_PACKAGE = "grub2-common"
# Words GRUB reads as they are on a `linux` line; anything else is single-quoted.
_PLAIN = re.compile(r"[A-Za-z0-9_./:=,+@-]+")


class EntryRefused(UserError):
    """The one-shot entry cannot be used here; the message says why and the fix."""


def refusal(release: str, sha256: str, root: Path = Path("/")) -> str | None:
    """Why this machine cannot boot the image through a one-shot GRUB entry; None when it can.
    GRUB boots what /boot holds, so the registered image must be installed there."""
    grub_cfg = root / GRUB_DIR / "grub.cfg"
    try:
        config = grub_cfg.read_text(errors="replace")
    except OSError:
        return f"no GRUB configuration ({grub_cfg}): `boot: reboot` needs GRUB as the boot loader"
    if "next_entry" not in config:
        return (f"{grub_cfg} has no one-shot entry (`next_entry`, which grub-reboot sets): "
                "regenerate it with update-grub")
    if "custom.cfg" not in config:
        return (f"{grub_cfg} does not source custom.cfg, where perfline writes its entry: make "
                "/etc/grub.d/41_custom executable and run update-grub")
    installed = root / "boot" / f"vmlinuz-{release}"
    if not installed.is_file():
        return (f"{installed} is not there, and GRUB boots what /boot holds: install the kernel's "
                "package, or `make install` from its tree")
    if sha256_of(installed) != sha256:
        return (f"{installed} is not the registered image (another sha256): register the installed one, "
                f"`perfline kernels add {installed} --name NAME`")
    return None


def entry_text(title: str, image: Path, initrd: Path | None, cmdline: str) -> str:
    """The menuentry, its files found by their file system's UUID as grub-mkconfig does."""
    uuid = _probe("fs_uuid", image)
    lines = [f"menuentry {_quote(title)} --id {ENTRY_ID} {{", "\tinsmod gzio"]
    lines += [f"\tinsmod part_{partmap}" for partmap in _probe("partmap", image).split()]
    lines += [f"\tinsmod {_probe('fs', image)}", f"\tsearch --no-floppy --fs-uuid --set=root {uuid}",
              f"\tlinux {_quote(_relative(image))} {' '.join(_quote(word) for word in cmdline.split())}"]
    if initrd is not None:
        lines.append(f"\tinitrd {_quote(_relative(initrd))}")
    return "\n".join([*lines, "}"]) + "\n"


def stage(release: str, title: str, initrd: Path | None, cmdline: str, root: Path = Path("/")) -> None:
    """Write the entry and make it GRUB's next boot (once). Nothing else changes."""
    image = root / "boot" / f"vmlinuz-{release}"
    text = entry_text(title, image, initrd, cmdline)
    custom = root / GRUB_DIR / "custom.cfg"
    kept = _without_block(_read(custom))
    write_durably(custom, f"{kept}{BEGIN}\n{text}{END}\n")
    try:
        run([_tool("grub-reboot"), f"--boot-directory={root / 'boot'}", ENTRY_ID], timeout=60)
    except (CommandFailed, EntryRefused) as exc:
        remove(root)
        message = tail(exc.output_tail, 3) if isinstance(exc, CommandFailed) else str(exc)
        raise EntryRefused(f"grub-reboot {ENTRY_ID} was refused: {message}") from None


def remove(root: Path = Path("/")) -> None:
    """perfline's block gone from custom.cfg (the file too, if nothing else was in it), and
    GRUB's next boot no longer perfline's entry if it still was (a boot that never started)."""
    custom = root / GRUB_DIR / "custom.cfg"
    text = _read(custom)
    if BEGIN in text:
        kept = _without_block(text)
        if kept.strip():
            write_durably(custom, kept)
        else:
            custom.unlink()
    grubenv = root / GRUB_DIR / "grubenv"
    if not grubenv.is_file():
        return
    try:
        editenv = _tool("grub-editenv")
        if f"next_entry={ENTRY_ID}" in run([editenv, str(grubenv), "list"], timeout=60).stdout.splitlines():
            run([editenv, str(grubenv), "unset", "next_entry"], timeout=60)
    except (CommandFailed, EntryRefused):
        pass  # GRUB clears next_entry itself at the next boot; the entry it named is gone


def _without_block(text: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < 0:
        return text
    return text[:start] + text[end + len(END):].lstrip("\n")


def _probe(target: str, path: Path) -> str:
    try:
        return run([_tool("grub-probe"), f"--target={target}", str(path)], timeout=60).stdout.strip()
    except CommandFailed as exc:
        raise EntryRefused(f"grub-probe --target={target} {path} failed: {tail(exc.output_tail, 2)}") from None


def _relative(path: Path) -> str:
    """The path as GRUB sees it on its file system (/vmlinuz-… when /boot is its own)."""
    try:
        return run([_tool("grub-mkrelpath"), str(path)], timeout=60).stdout.strip()
    except CommandFailed as exc:
        raise EntryRefused(f"grub-mkrelpath {path} failed: {tail(exc.output_tail, 2)}") from None


def _tool(name: str) -> str:
    try:
        return require_tool(name, GRUB_PACKAGE)
    except ToolMissing as exc:
        raise EntryRefused(str(exc)) from None


def _quote(word: str) -> str:
    return word if _PLAIN.fullmatch(word) else "'" + word.replace("'", "'\\''") + "'"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""
