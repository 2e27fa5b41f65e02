"""The initramfs a VM boots: busybox, the guest agent as /init, and a benchmark's tools.

Executables go in at their host paths, with the shared libraries `ldd` resolves for
them (also at their host paths), so the argv a benchmark builds on the host runs
unchanged in the guest. The archive is a gzipped newc cpio written here, cached
under `<cache>/initramfs/<hash>.cpio.gz` where the hash covers every input's path
and content: it is rebuilt only when an input changes.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import stat
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path, PurePosixPath

from perfline.system.process import CommandFailed, ToolMissing, require_tool, run
from perfline.targets.kernels import cache_dir

BUSYBOX_PACKAGE = "busybox-static"
# Directories the agent mounts on or writes to; they must exist before /init runs.
MOUNT_POINTS = ("bin", "dev", "proc", "sys", "tmp", "sbin", "usr/bin", "usr/sbin")
# `ldd` lines: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or, for the
# dynamic loader, "/lib64/ld-linux-x86-64.so.2 (0x...)".
_LDD_PATH = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x[0-9a-f]+\)")


class InitramfsError(RuntimeError):
    """An input cannot be packed (missing, or its libraries cannot be resolved)."""


def agent_script() -> bytes:
    return resources.files("perfline.targets").joinpath("guest_agent.sh").read_bytes()


def build(
    executables: Iterable[Path], cache: Path | None = None, extra: Mapping[str, bytes] | None = None
) -> Path:
    """The initramfs for these executables and `extra` files (guest path → content),
    built unless an identical one is cached."""
    files = {**contents(executables), **(extra or {})}
    digest = hashlib.sha256()
    for guest_path in sorted(files):
        digest.update(f"{guest_path}\0{len(files[guest_path])}\0".encode())
        digest.update(files[guest_path])
    directory = (cache or cache_dir()) / "initramfs"
    path = directory / f"{digest.hexdigest()[:32]}.cpio.gz"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    try:
        # Level 1: the guest decompresses it under emulation, where every cycle counts.
        with gzip.open(partial, "wb", compresslevel=1) as out:
            out.write(cpio(files))
        partial.rename(path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def contents(executables: Iterable[Path]) -> dict[str, bytes]:
    """Guest path → content of every regular file in the image."""
    busybox = Path(require_tool("busybox", BUSYBOX_PACKAGE))
    files = {"init": agent_script()}
    for executable in [busybox, *executables]:
        for path in [executable, *shared_libraries(executable)]:
            guest = str(path).lstrip("/")
            files.setdefault(guest, _read(path))
    # At /bin/busybox whatever the host path: /init's interpreter line names it there.
    files["bin/busybox"] = files.pop(str(busybox).lstrip("/"))
    return files


def shared_libraries(executable: Path) -> list[Path]:
    """The libraries and dynamic loader `ldd` resolves for it; none for a static one."""
    try:
        output = run(["ldd", str(executable)], timeout=30).stdout
    except CommandFailed as exc:
        if "not a dynamic executable" in exc.output_tail:
            return []
        raise InitramfsError(f"ldd {executable}: {exc}\n{exc.output_tail}") from exc
    except ToolMissing as exc:  # pragma: no cover - ldd ships with libc-bin
        raise InitramfsError(str(exc)) from exc
    if "not found" in output:
        missing = [line.strip() for line in output.splitlines() if "not found" in line]
        raise InitramfsError(f"{executable}: libraries not found: {', '.join(missing)}")
    return [Path(match) for match in _LDD_PATH.findall(output)]


def cpio(files: dict[str, bytes]) -> bytes:
    """A newc archive: the mount points and every parent directory, then the files."""
    directories = set(MOUNT_POINTS)
    for name in files:
        directories.update(str(p) for p in PurePosixPath(name).parents if str(p) != ".")
    entries = [(d, stat.S_IFDIR | 0o755, b"") for d in sorted(directories)]
    entries += [(n, stat.S_IFREG | 0o755, files[n]) for n in sorted(files)]
    entries.append(("TRAILER!!!", 0, b""))
    return b"".join(_entry(number, *entry) for number, entry in enumerate(entries, start=1))


def _entry(inode: int, name: str, mode: int, data: bytes) -> bytes:
    encoded = name.encode() + b"\0"
    links = 2 if stat.S_ISDIR(mode) else 1
    fields = (inode, mode, 0, 0, links, 0, len(data), 0, 0, 0, 0, len(encoded), 0)
    header = b"070701" + b"".join(b"%08X" % value for value in fields)
    return _pad(header + encoded) + _pad(data)


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InitramfsError(f"cannot pack {path}: {exc.strerror or exc}") from exc
