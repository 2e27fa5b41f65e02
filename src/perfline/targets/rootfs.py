"""The Debian root file system a guest mounts when its benchmark needs more than an initramfs.

`debootstrap --variant=minbase` of SUITE from the mirror with the benchmarks'
packages, packed into an ext4 image without mounting anything (`mkfs.ext4 -d`). Images
are cached as `<cache>/rootfs/<key>.ext4`, the key a hash of every input (suite,
mirror, packages, and RECIPE for the steps below), so that one is built once, and again
only when an input changes. The guest agent is not an input: the initramfs copies
itself into the guest at boot, so a change to the agent costs no rebuild.

A build runs under a lock beside its final name and is renamed in only when complete:
a build killed halfway leaves `.partial` leftovers that are never booted, and that the
next build unmounts (debootstrap mounts /proc and /sys in its target) and removes.
QEMU boots the image with snapshot=on, so the cached file is never written.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perfline.system.process import CommandFailed, require_tool, run, tail
from perfline.targets.bootmodules import missing_drivers
from perfline.targets.kernels import Kernel, cache_dir

SUITE = "bookworm"
MIRROR_ENV = "PERFLINE_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Bump when a change to the steps below changes what lands in an image.
RECIPE = 1
ROOT_DEVICE = "/dev/vda"  # the only disk, on virtio-blk
# Free space for what benchmarks write (a pgbench database); the file is sparse, so
# it costs nothing until written, and writes go to QEMU's throwaway overlay anyway.
HEADROOM_BYTES = 4 << 30
DEBOOTSTRAP_TIMEOUT_S = 3600.0
MKFS_TIMEOUT_S = 900.0
# Downloaded packages and apt's indexes: build leftovers a guest never uses.
LEFTOVERS = ("var/cache/apt", "var/lib/apt/lists")


class RootfsError(RuntimeError):
    """The image cannot be built, or the kernel cannot boot from it; says why."""


def default_mirror() -> str:
    return os.environ.get(MIRROR_ENV) or DEFAULT_MIRROR


@dataclass(frozen=True)
class RootfsSpec:
    packages: tuple[str, ...]
    suite: str = SUITE
    mirror: str = field(default_factory=default_mirror)

    @property
    def key(self) -> str:
        inputs = {
            "recipe": RECIPE,
            "suite": self.suite,
            "mirror": self.mirror.rstrip("/"),
            "packages": sorted(set(self.packages)),
        }
        return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:32]


def rootfs_dir(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "rootfs"


def cached(spec: RootfsSpec, cache: Path | None = None) -> Path | None:
    """The finished image for `spec`, or None; leftovers of an unfinished build never count."""
    path = rootfs_dir(cache) / f"{spec.key}.ext4"
    return path if path.is_file() else None


def build(
    spec: RootfsSpec, cache: Path | None = None, progress: Callable[[str], None] = lambda _: None
) -> Path:
    """The image for `spec`, built first unless cached (minutes: it says so via `progress`)."""
    found = cached(spec, cache)
    if found is not None:
        return found
    directory = rootfs_dir(cache)
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"{spec.key}.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another perfline building the guest root file system {spec.key}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        found = cached(spec, cache)  # the other one may have just finished it
        if found is not None:
            return found
        return _build_locked(spec, directory, progress)


def initramfs_files(kernel: Kernel) -> dict[str, bytes]:
    """What the initramfs needs to mount the root disk with `kernel` (see guest_agent.sh)."""
    modules = kernel.boot_modules() or []
    missing = missing_drivers(kernel.config(), (path.stem for path in modules))
    if missing:
        raise RootfsError(
            f"kernel {kernel.name} cannot mount the root file system this benchmark needs: "
            f"build it with {', '.join(f'{option}=y' for option in missing)}, or register it "
            "with those drivers' modules (`perfline kernels add IMAGE --modules "
            f"/lib/modules/{kernel.release}`; `kernels add-deb` keeps them)"
        )
    files = {"perfline/root": f"{ROOT_DEVICE}\n".encode()}
    for path in modules:
        files[f"perfline/modules/{path.name}"] = path.read_bytes()
    if modules:
        files["perfline/modules/order"] = "".join(f"{path.name}\n" for path in modules).encode()
    return files


def _build_locked(spec: RootfsSpec, directory: Path, progress: Callable[[str], None]) -> Path:
    if os.geteuid() != 0:
        raise RootfsError(
            "building the guest root file system needs root (debootstrap installs packages "
            "in a chroot): run this once as root; later runs use the cached image"
        )
    debootstrap = require_tool("debootstrap", "debootstrap")
    mkfs = require_tool("mkfs.ext4", "e2fsprogs")
    setpriv = require_tool("setpriv", "util-linux")
    for leftover in directory.glob(f"{spec.key}.*partial"):
        _remove(leftover)
    staging = directory / f"{spec.key}.partial"
    image = directory / f"{spec.key}.ext4.partial"
    final = directory / f"{spec.key}.ext4"
    progress(
        f"building the guest root file system (debootstrap {spec.suite} with "
        f"{', '.join(sorted(set(spec.packages)))}): a few minutes, once, into {final}"
    )
    try:
        try:
            # pdeathsig: a killed perfline takes debootstrap with it, not leaving it running.
            run(
                [
                    setpriv, "--pdeathsig", "KILL", "--", debootstrap, "--variant=minbase",
                    f"--include={','.join(sorted(set(spec.packages)))}", spec.suite,
                    str(staging), spec.mirror,
                ],
                timeout=DEBOOTSTRAP_TIMEOUT_S,
            )  # fmt: skip
        except CommandFailed as exc:
            log = staging / "debootstrap" / "debootstrap.log"
            detail = tail(log.read_text(errors="replace")) if log.is_file() else exc.output_tail
            raise RootfsError(f"debootstrap {spec.suite} from {spec.mirror} failed: {exc}\n{detail}") from exc
        for directory_name in LEFTOVERS:
            for entry in (staging / directory_name).glob("*"):
                _remove(entry)
        with image.open("wb") as out:
            out.truncate(_round_up(_used_bytes(staging) + HEADROOM_BYTES, 1 << 20))
        try:
            run([mkfs, "-q", "-F", "-L", "perfline-root", "-d", str(staging), str(image)], timeout=MKFS_TIMEOUT_S)
        except CommandFailed as exc:
            raise RootfsError(f"mkfs.ext4 -d {staging} failed: {exc}\n{exc.output_tail}") from exc
        image.chmod(0o444)
        image.rename(final)
    finally:
        _remove(staging)
        image.unlink(missing_ok=True)
    return final


def _remove(path: Path) -> None:
    """Remove a file or tree, first unmounting what a killed debootstrap left mounted
    in it (its /proc, /sys, bound /dev nodes), so that nothing outside is touched."""
    if path.is_dir() and not path.is_symlink():
        for mount_point in sorted(_mounts_under(path), reverse=True):
            run(["umount", "--lazy", mount_point], timeout=60)
        if _mounts_under(path):
            raise RootfsError(f"{path} still has file systems mounted in it; unmount them")
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _mounts_under(path: Path) -> list[str]:
    prefix = f"{path.resolve()}/"
    with open("/proc/self/mounts") as mounts:
        # Spaces in mount points are written as \040.
        points = [line.split()[1].replace("\\040", " ") for line in mounts]
    return [p for p in points if p.startswith(prefix)]


def _used_bytes(root: Path) -> int:
    total = 0
    for directory, _, names in os.walk(root):
        total += sum(os.lstat(os.path.join(directory, n)).st_blocks * 512 for n in names)
    return total


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit

