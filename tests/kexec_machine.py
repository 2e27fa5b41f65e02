"""The test machine of the kexec target: a QEMU guest that plays a lab machine.

A Debian bookworm root file system with systemd, kexec-tools and both Debian kernels
installed as a lab machine has them (`dpkg -i` of the exact packages `perfline kernels
add-deb` registered: /boot/vmlinuz-R, /boot/initrd.img-R, /lib/modules/R), this host's
Python and the project's virtualenv at their own paths (Debian's cloud kernels have no
9p, so they are copied in rather than shared), and two units of the test's own:

- the network: systemd-networkd gives the guest 10.0.2.15 on QEMU's user-mode network,
  where 10.0.2.2 is this host's loopback (the tests' private PostgreSQL);
- `perfline-guest-test.service`: after `perfline-resume.service`, it runs `driver.sh`
  from the second disk, which the test writes (the project's sources, the kernel
  registry, the test's steps), so a change to the code costs no rebuild of the image.

The image is built once (minutes) and cached by a hash of its inputs; QEMU boots it
with snapshot=on, so a guest's writes live as long as its QEMU process (across the
guest's reboots and kexecs) and the cached file never changes. The guest boots the 6.1
kernel the way firmware boots its default: QEMU's `-kernel` again at every reset.

GRUB is installed as on a BIOS machine whose boot loader sits on its own small disk:
`grub_disk` lays the image's boot.img and core.img (built with the image, as
grub-install builds them) on a third disk QEMU's firmware boots; core.img finds the root
file system by its UUID and reads /boot/grub/grub.cfg there. Booted that way (`run_guest`
with `grub=True`), every reset of the guest goes through the real GRUB, its grubenv and
its one-shot entry (`boot: reboot`); the other tests boot with QEMU's `-kernel`. The image
holds a first grub.cfg that boots the default kernel; a test that boots through GRUB runs
`update-grub` first, as a lab machine's setup does.

ramoops keeps the last kernel messages of a boot that panicked in 1 MiB of RAM that
both kernels leave alone (`memmap=`); QEMU's reset keeps the RAM, as a warm reset of
real hardware does, and the next boot reads them in /sys/fs/pstore (systemd-pstore
moves them to /var/lib/systemd/pstore).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from perfline.targets.kernels import Kernel

RECIPE = 3
PACKAGES = (
    "systemd-sysv", "udev", "kexec-tools", "initramfs-tools", "kmod", "linux-base", "zstd",
    "grub2-common", "grub-pc-bin",
    "iproute2", "procps", "libssl3", "libsqlite3-0", "libffi8", "libgdbm6", "libexpat1",
    "libreadline8", "libbz2-1.0", "liblzma5", "libtirpc3", "libuuid1",
)  # fmt: skip
MIRROR = os.environ.get("PERFLINE_DEBIAN_MIRROR") or "http://deb.debian.org/debian"
VENV = Path(sys.prefix)
PYTHON_HOME = Path(os.path.realpath(sys.executable)).parents[1]
TEST_DISK_MOUNT = "/opt/perfline-test"
# 1 MiB kept from both kernels for ramoops, below the top of a 1 GiB guest's RAM.
PSTORE_CMDLINE = (
    "memmap=1M$0x3f000000 ramoops.mem_address=0x3f000000 ramoops.mem_size=0x100000 "
    "ramoops.record_size=0x40000 ramoops.ecc=0"
)
DEFAULT_CMDLINE = f"root=/dev/vda rw console=ttyS0 panic=10 {PSTORE_CMDLINE}"

UNITS = {
    "etc/systemd/network/10-slirp.network": """\
[Match]
Name=en*

[Network]
Address=10.0.2.15/24
Gateway=10.0.2.2
""",
    "etc/systemd/system/perfline-guest-test.service": f"""\
[Unit]
Description=perfline test machine: the test's steps (driver.sh on the second disk)
Wants=network-online.target
After=network-online.target perfline-resume.service
RequiresMountsFor={TEST_DISK_MOUNT}
ConditionPathExists={TEST_DISK_MOUNT}/driver.sh

[Service]
Type=oneshot
ExecStart=/bin/sh {TEST_DISK_MOUNT}/driver.sh
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
""",
    # Not nofail: local-fs.target waits for it, and so every service (the resume unit too).
    # systemd waits 90 s for a device by default: at a load average of ~22 the 6.12 guest's
    # /dev/vdb came later than that once, and the guest stopped in emergency mode.
    "etc/fstab": f"/dev/vdb {TEST_DISK_MOUNT} ext4 rw,x-systemd.device-timeout=15min 0 2\n",
    "etc/systemd/system.conf.d/slow-machine.conf":
        "[Manager]\nDefaultTimeoutStartSec=15min\nDefaultDeviceTimeoutSec=15min\n",
    "etc/hostname": "perfline-lab\n",
    # The package's own question: a reboot must reset the machine, not kexec.
    "etc/default/kexec": "LOAD_KEXEC=false\n",
    # In every initramfs, so that a kernel which panics once its root is mounted leaves
    # its messages in pstore.
    "etc/initramfs-tools/modules": "ramoops\n",
    "etc/modules-load.d/ramoops.conf": "ramoops\n",
}
ENABLED = {
    "etc/systemd/system/multi-user.target.wants/perfline-guest-test.service":
        "/etc/systemd/system/perfline-guest-test.service",
    "etc/systemd/system/multi-user.target.wants/systemd-networkd.service":
        "/lib/systemd/system/systemd-networkd.service",
    "etc/systemd/system/network-online.target.wants/systemd-networkd-wait-online.service":
        "/lib/systemd/system/systemd-networkd-wait-online.service",
}


# /etc/default/grub of the lab machine: the default kernel (the first of the image's) pinned
# by its entry's id, as an administrator keeps a known-good kernel the default; no menu.
# `rw`: the image's fstab has no line for its root (which Debian's entries mount `ro`).
GRUB_DEFAULTS = """\
GRUB_DEFAULT="gnulinux-{release}-advanced-{uuid}"
GRUB_DISABLE_SUBMENU=y
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=Debian
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_CMDLINE_LINUX="rw console=ttyS0 panic=10"
GRUB_TERMINAL=serial
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB_DISABLE_RECOVERY=true
GRUB_DISABLE_OS_PROBER=true
"""
# What grub-install embeds: find the root file system by UUID, read /boot/grub there.
GRUB_LOAD_CFG = "search.fs_uuid {uuid} root\nset prefix=($root)'/boot/grub'\n"
GRUB_CORE_MODULES = ("biosdisk", "ext2", "search_fs_uuid")
# The image's first grub.cfg, until `update-grub` on the guest writes the real one.
GRUB_FIRST_CFG = """\
serial --unit=0 --speed=115200
terminal_input serial
terminal_output serial
search --no-floppy --fs-uuid --set=root {uuid}
linux /boot/vmlinuz-{release} root=UUID={uuid} rw console=ttyS0 panic=10
initrd /boot/initrd.img-{release}
boot
"""


def machine_key(kernels: list[Kernel]) -> str:
    site = sorted(p.name for p in (VENV / "lib").glob("python*/site-packages/*"))
    inputs = {
        "recipe": RECIPE, "packages": PACKAGES, "mirror": MIRROR.rstrip("/"),
        "kernels": [k.meta.source for k in kernels], "python": str(PYTHON_HOME), "venv": str(VENV),
        "site": site, "units": UNITS,
        "grub": [GRUB_DEFAULTS, GRUB_LOAD_CFG, GRUB_CORE_MODULES, GRUB_FIRST_CFG],
    }  # fmt: skip
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]


def machine_image(cache: Path, kernels: list[Kernel]) -> Path:
    """The image (built first unless cached: debootstrap, the kernels, Python; minutes)."""
    directory = cache / "kexec-machine"
    directory.mkdir(parents=True, exist_ok=True)
    key = machine_key(kernels)
    final = directory / f"{key}.ext4"
    with (directory / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not final.is_file():
            _build(directory, key, kernels)
    return final


# A kernel that panics at boot on the lab machine, built for real from Debian's Linux
# source: tinyconfig has no block device or file system driver for the guest's root, so
# it finds no root and no init and panics, and panic=10 (from the command line perfline
# gives it) resets the guest; printk, the serial console and ramoops let the panic be seen
# on the console and kept in pstore. Built without modules, it needs no initramfs.
PANICKING_SOURCE = "linux-source-6.1"
PANICKING_OPTIONS = ("64BIT", "PRINTK", "TTY", "SERIAL_8250", "SERIAL_8250_CONSOLE", "BINFMT_ELF")
# pstore sits under the miscellaneous file systems; wanted, not required (the serial
# console shows the panic either way).
PANICKING_WANTED = ("MISC_FILESYSTEMS", "PSTORE", "PSTORE_RAM", "PSTORE_CONSOLE")


def panicking_kernel(cache: Path) -> Path:
    """A directory with the panicking kernel's bzImage and .config (built once, minutes)."""
    key = hashlib.sha256(json.dumps([PANICKING_SOURCE, PANICKING_OPTIONS, PANICKING_WANTED]).encode()
                         ).hexdigest()[:16]
    directory = cache / "kexec-machine" / f"panicking-{key}"
    directory.parent.mkdir(parents=True, exist_ok=True)
    with (directory.parent / f"panicking-{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (directory / "bzImage").is_file():
            _build_panicking(directory)
    return directory


def _build_panicking(directory: Path) -> None:
    staging = directory.with_name(f"{directory.name}.partial")
    _remove(staging)
    staging.mkdir()
    try:
        _run(["apt-get", "download", "-q", PANICKING_SOURCE], cwd=staging, timeout=1800)
        [deb] = staging.glob("*.deb")
        _run(["dpkg-deb", "-x", str(deb), str(staging / "deb")], timeout=600)
        [tarball] = (staging / "deb/usr/src").glob("linux-source-*.tar.xz")
        _run(["tar", "-xf", str(tarball), "-C", str(staging)], timeout=1800)
        [tree] = (path for path in staging.glob("linux-source-*") if path.is_dir())
        _run(["make", "-C", str(tree), "tinyconfig"], timeout=600)
        _run([str(tree / "scripts/config"), "--file", str(tree / ".config"),
              *(arg for option in PANICKING_OPTIONS + PANICKING_WANTED for arg in ("--enable", option))])
        _run(["make", "-C", str(tree), "olddefconfig"], timeout=600)
        config = (tree / ".config").read_text()
        missing = [o for o in PANICKING_OPTIONS if f"CONFIG_{o}=y" not in config]
        if missing or "# CONFIG_MODULES is not set" not in config:
            raise AssertionError(f"the panicking kernel's config lacks {missing} or has modules")
        _run(["make", "-C", str(tree), f"-j{os.cpu_count() or 1}", "bzImage"], timeout=7200)
        built = directory.with_name(f"{directory.name}.kept")
        _remove(built)
        built.mkdir()
        shutil.copyfile(tree / "arch/x86/boot/bzImage", built / "bzImage")
        shutil.copyfile(tree / ".config", built / "config")
        built.rename(directory)
    finally:
        _remove(staging)


def grub_disk(image: Path, into: Path) -> Path:
    """The lab machine's boot disk: GRUB's boot.img in its first sector and core.img from
    the next on, where grub-install embeds them before the first partition (boot.img's
    and core.img's own defaults point there)."""
    disk = into / "grub-boot.img"
    parts = {}
    for name in ("boot.img", "core.img"):
        _run(["debugfs", "-R", f"dump /boot/grub/i386-pc/{name} {into / name}", str(image)])
        parts[name] = (into / name).read_bytes()
    if len(parts["boot.img"]) != 512 or not parts["core.img"]:
        raise AssertionError(f"{image} has no GRUB boot.img and core.img in /boot/grub/i386-pc")
    with disk.open("wb") as out:
        out.write(parts["boot.img"] + parts["core.img"])
        out.truncate(1 << 20)
    return disk


def boot_files(image: Path, release: str, into: Path) -> Path:
    """The default kernel's initrd from the image, as firmware would load it."""
    initrd = into / f"initrd.img-{release}"
    if not initrd.is_file():
        _run(["debugfs", "-R", f"dump /boot/initrd.img-{release} {initrd}", str(image)])
        if not initrd.is_file() or initrd.stat().st_size == 0:
            raise AssertionError(f"{image} has no /boot/initrd.img-{release}")
    return initrd


def _build(directory: Path, key: str, kernels: list[Kernel]) -> None:
    staging = directory / f"{key}.partial"
    partial = directory / f"{key}.ext4.partial"
    _remove(staging)
    partial.unlink(missing_ok=True)
    try:
        _run(["setpriv", "--pdeathsig", "KILL", "--", "debootstrap", "--variant=minbase",
              f"--include={','.join(PACKAGES)}", "bookworm", str(staging), MIRROR], timeout=3600)
        for path, text in UNITS.items():
            (staging / path).parent.mkdir(parents=True, exist_ok=True)
            (staging / path).write_text(text)
        for link, target in ENABLED.items():
            (staging / link).parent.mkdir(parents=True, exist_ok=True)
            (staging / link).symlink_to(target)
        (staging / TEST_DISK_MOUNT.lstrip("/")).mkdir(parents=True)
        (staging / "var/log/journal").mkdir(parents=True, exist_ok=True)  # keep the previous boot's
        debs = staging / "tmp/kernels"
        debs.mkdir(parents=True)
        for kernel in kernels:
            package = kernel.meta.source.split(" -> ")[-1].removeprefix("deb:")
            _run(["apt-get", "download", "-q", package], cwd=debs, timeout=600)
        _in_chroot(staging, ["sh", "-c", "dpkg -i /tmp/kernels/*.deb"])
        shutil.rmtree(debs)
        root_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"perfline-lab/{key}"))
        _install_grub(staging, root_uuid, kernels[0].release)
        for leftover in ("var/cache/apt", "var/lib/apt/lists"):
            for entry in (staging / leftover).glob("*"):
                _remove(entry)
        for source in (PYTHON_HOME, VENV):
            target = staging / str(source).lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            _run(["cp", "-a", str(source), str(target)], timeout=1800)
        used = int(_run(["du", "-sb", str(staging)]).split()[0])
        with partial.open("wb") as out:
            out.truncate(-(-(used + (2 << 30)) // (1 << 20)) * (1 << 20))
        _run(["mkfs.ext4", "-q", "-F", "-L", "perfline-lab", "-U", root_uuid, "-d", str(staging), str(partial)], timeout=1800)
        partial.chmod(0o444)
        partial.rename(directory / f"{key}.ext4")
    finally:
        _remove(staging)
        partial.unlink(missing_ok=True)


def _install_grub(staging: Path, root_uuid: str, default_release: str) -> None:
    """What grub-install leaves on a BIOS machine (its modules and images in
    /boot/grub/i386-pc, core.img built to find the root by UUID), /etc/default/grub, and
    a first grub.cfg that boots the default kernel."""
    (staging / "etc/default/grub").write_text(GRUB_DEFAULTS.format(release=default_release, uuid=root_uuid))
    modules = staging / "boot/grub/i386-pc"
    modules.mkdir(parents=True)
    (modules / "load.cfg").write_text(GRUB_LOAD_CFG.format(uuid=root_uuid))
    install = ("cp -a /usr/lib/grub/i386-pc/. /boot/grub/i386-pc/ && grub-mkimage -O i386-pc -d /usr/lib/grub/i386-pc "
               "-o /boot/grub/i386-pc/core.img -c /boot/grub/i386-pc/load.cfg -p /boot/grub "
               + " ".join(GRUB_CORE_MODULES))
    _in_chroot(staging, ["sh", "-c", install])
    (staging / "boot/grub/grub.cfg").write_text(GRUB_FIRST_CFG.format(uuid=root_uuid, release=default_release))


def _in_chroot(root: Path, argv: list[str]) -> None:
    """A command in the staging tree with /proc mounted (update-initramfs reads it)."""
    proc = root / "proc"
    _run(["mount", "-t", "proc", "proc", str(proc)])
    try:
        _run(["chroot", str(root), *argv], timeout=1800,
             env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive"})
    finally:
        _run(["umount", "--lazy", str(proc)])


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
        return
    if not path.exists():
        return
    prefix = f"{path.resolve()}/"
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, reverse=True):
        _run(["umount", "--lazy", point])
    shutil.rmtree(path)


def _run(argv: list[str], cwd: Path | None = None, timeout: float = 300,
         env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout
