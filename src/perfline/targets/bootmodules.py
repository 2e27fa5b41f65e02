"""The kernel modules a guest needs to mount its root disk, and their dependencies.

Debian's cloud kernels build virtio_blk (6.1 also virtio and virtio_pci) as modules,
and a guest booted from perfline's initramfs has no modprobe or modules.dep, so the
registry keeps the few it needs, dependencies first, and the initramfs loads them
with insmod. Dependencies come from each module's own `.modinfo` (its `depends=`
line): Debian's packages ship no modules.dep, which depmod writes at install time.
"""

from __future__ import annotations

import gzip
import lzma
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from perfline.records.fingerprint import config_options

# What mounting the root disk takes: the option and the module it builds as `=m`.
# CRYPTO_CRC32C: ext4 checksums its metadata with crc32c, found through the crypto API.
ROOT_DISK_DRIVERS = (
    ("CONFIG_VIRTIO_PCI", "virtio_pci"),
    ("CONFIG_VIRTIO_BLK", "virtio_blk"),
    ("CONFIG_EXT4_FS", "ext4"),
    ("CONFIG_CRYPTO_CRC32C", "crc32c_generic"),
)
_DECOMPRESS: dict[str, Callable[[bytes], bytes]] = {
    ".ko": bytes,
    ".ko.xz": lzma.decompress,
    ".ko.gz": gzip.decompress,
}


class ModulesError(RuntimeError):
    """The modules cannot be read, or do not belong to the kernel."""


@dataclass(frozen=True)
class Module:
    name: str
    data: bytes  # uncompressed: busybox insmod reads plain ELF only


def module_name(path: Path) -> str:
    """`virtio-blk.ko.xz` → `virtio_blk`: the kernel treats '-' and '_' alike."""
    name = path.name
    for suffix in _DECOMPRESS:
        name = name.removesuffix(suffix)
    return name.replace("-", "_")


def root_disk_modules(tree: Path, release: str, config: str | None) -> list[Module]:
    """The modules of `tree` (a /lib/modules/RELEASE directory) that mounting the root
    disk needs, dependencies first: those of ROOT_DISK_DRIVERS the tree holds, except
    what the config builds in. One it lacks is left out, not an error: the kernel may
    never boot a root disk, and `missing_drivers` names it when it has to."""
    files = {module_name(p): p for p in _module_files(tree)}
    options = config_options(config) if config is not None else {}
    wanted = [m for o, m in ROOT_DISK_DRIVERS if m in files and options.get(o) != "y"]
    ordered: list[Module] = []
    seen: set[str] = set()

    def visit(name: str, needed_by: str | None) -> None:
        if name in seen:
            return
        seen.add(name)
        if name not in files:
            via = f" (needed by {needed_by})" if needed_by else ""
            raise ModulesError(f"module {name}{via} not found under {tree}")
        data = _read_module(files[name])
        info = modinfo(data)
        if not info.get("vermagic", "").startswith(f"{release} "):
            raise ModulesError(
                f"{files[name]} was built for {info.get('vermagic', 'an unknown kernel').split()[0]}, "
                f"not for {release}"
            )
        for dependency in filter(None, info.get("depends", "").split(",")):
            visit(dependency.replace("-", "_"), name)
        ordered.append(Module(name, data))

    for name in wanted:
        visit(name, None)
    return ordered


def missing_drivers(config: str | None, modules: Iterable[str]) -> list[str]:
    """Options of ROOT_DISK_DRIVERS neither built in nor covered by `modules`; [] when
    the config is unknown, as then only booting can tell."""
    if config is None:
        return []
    options = config_options(config)
    have = set(modules)
    return [o for o, m in ROOT_DISK_DRIVERS if options.get(o, "n") != "y" and m not in have]


def modinfo(data: bytes) -> dict[str, str]:
    """The `key=value` strings of an ELF64 module's .modinfo section (first of each key)."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ModulesError("not an ELF64 kernel module")
    section_offset = struct.unpack_from("<Q", data, 0x28)[0]
    entry_size, count, names_index = struct.unpack_from("<HHH", data, 0x3A)

    def section(index: int) -> tuple[int, int, int]:
        """(name offset, file offset, size) of section header `index`."""
        base = section_offset + index * entry_size
        name = struct.unpack_from("<I", data, base)[0]
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name, offset, size

    _, names_at, _ = section(names_index)
    for index in range(count):
        name, offset, size = section(index)
        if data[names_at + name : data.index(b"\0", names_at + name)] == b".modinfo":
            info: dict[str, str] = {}
            for entry in data[offset : offset + size].split(b"\0"):
                key, sep, value = entry.decode(errors="replace").partition("=")
                if sep:
                    info.setdefault(key, value)
            return info
    raise ModulesError("no .modinfo section: not a kernel module")


def _module_files(tree: Path) -> list[Path]:
    found = []
    for directory, _, names in os.walk(tree):
        found += [Path(directory, n) for n in names if n.endswith(tuple(_DECOMPRESS))]
    return sorted(found)


def _read_module(path: Path) -> bytes:
    suffix = next(s for s in sorted(_DECOMPRESS, key=len, reverse=True) if path.name.endswith(s))
    try:
        return _DECOMPRESS[suffix](path.read_bytes())
    except (OSError, lzma.LZMAError, gzip.BadGzipFile) as exc:
        raise ModulesError(f"cannot read {path}: {exc}") from exc
