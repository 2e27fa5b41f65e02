"""The kernel registry: boot images a VM target can start, by name.

Each kernel lives in `<cache>/kernels/<name>/` as `vmlinuz`, its `config` when known,
`meta.json` (release, source, sha256) and, when its modules were given, `modules/`:
the few a guest needs to mount a root disk (bootmodules), listed in load order in
`modules/order`. Names are what jobs and `--kernel` use; the release is read from the
image itself, so a mislabelled file cannot pass for another kernel.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from perfline.system.process import CommandFailed, require_tool, run
from perfline.targets.bootmodules import ModulesError, root_disk_modules

CACHE_ENV = "PERFLINE_CACHE_DIR"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
META = "meta.json"
# An x86 bzImage's setup header: "HdrS" at 0x202, and at 0x20e a pointer (relative to
# 0x200) to the NUL-terminated version string the kernel was built with.
HEADER_MAGIC_AT, HEADER_MAGIC = 0x202, b"HdrS"
VERSION_POINTER_AT = 0x20E
APT_TIMEOUT_S = 600.0
MODULES = "modules"
MODULE_ORDER = "order"


class KernelError(RuntimeError):
    """A kernel cannot be registered or found; the message says what to do."""


@dataclass(frozen=True)
class KernelMeta:
    name: str
    release: str
    # Where it came from: `file:/boot/vmlinuz-...` or `deb:linux-image-...=version`.
    source: str
    sha256: str


@dataclass(frozen=True)
class Kernel:
    meta: KernelMeta
    directory: Path

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def release(self) -> str:
        return self.meta.release

    @property
    def image(self) -> Path:
        return self.directory / "vmlinuz"

    @property
    def config_path(self) -> Path:
        return self.directory / "config"

    def config(self) -> str | None:
        """The .config it was built with, when registered with one."""
        path = self.config_path
        return path.read_text(errors="replace") if path.exists() else None

    def boot_modules(self) -> list[Path] | None:
        """The root disk's modules in load order; None when registered without modules."""
        order = self.directory / MODULES / MODULE_ORDER
        if not order.is_file():
            return None
        return [order.parent / name for name in order.read_text().split()]


def cache_dir() -> Path:
    """$PERFLINE_CACHE_DIR, else $XDG_CACHE_HOME/perfline, else ~/.cache/perfline."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perfline"


def kernels_dir() -> Path:
    return cache_dir() / "kernels"


def is_registered(name: str) -> bool:
    return (kernels_dir() / name / META).is_file()


def list_kernels() -> list[Kernel]:
    root = kernels_dir()
    if not root.is_dir():
        return []
    return [_load(d) for d in sorted(root.iterdir()) if (d / META).is_file()]


def get_kernel(name: str) -> Kernel:
    directory = kernels_dir() / name
    if NAME_PATTERN.fullmatch(name) and (directory / META).is_file():
        return _load(directory)
    raise KernelError(unknown_kernel_message(name))


def unknown_kernel_message(name: str) -> str:
    known = [k.name for k in list_kernels()]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if close:
        return f"unknown kernel {name!r}: did you mean {' or '.join(close)}?"
    if known:
        return f"unknown kernel {name!r}: registered are {', '.join(known)}"
    return (
        f"unknown kernel {name!r}: none registered; add one with "
        "`perfline kernels add PATH --name NAME` or `perfline kernels add-deb PACKAGE`"
    )


def image_release(image: Path) -> str:
    """The release (`uname -r`) an x86 bzImage was built as, from its setup header."""
    return image_banner(image).split()[0]


def image_banner(image: Path) -> str:
    """The bzImage header's version string: `RELEASE (BUILDER) VERSION`, where VERSION
    is what the booted kernel shows in /proc/sys/kernel/version (`#1 SMP ... (date)`)."""
    with image.open("rb") as f:
        header = f.read(0x400)
        if len(header) < 0x210 or header[HEADER_MAGIC_AT : HEADER_MAGIC_AT + 4] != HEADER_MAGIC:
            raise KernelError(f"{image} is not an x86 bzImage (no setup header)")
        pointer = int.from_bytes(header[VERSION_POINTER_AT : VERSION_POINTER_AT + 2], "little")
        f.seek(pointer + 0x200)
        banner = f.read(256).split(b"\0", 1)[0].decode(errors="replace").strip()
    if not banner:
        raise KernelError(f"{image}: the bzImage header names no kernel version")
    return banner


def add_image(
    image: Path,
    name: str,
    *,
    config: Path | None = None,
    modules: Path | None = None,
    source: str | None = None,
    replace: bool = False,
) -> Kernel:
    """Copy a bzImage (and its config) into the registry under `name`.

    Without `config`, `config-<release>` beside the image is taken when present (the
    /boot layout). `modules`, its /lib/modules/RELEASE tree, is where the root disk's
    modules are taken from. Registering the same image again under its name is a no-op.
    """
    check_name(name)
    if not image.is_file():
        raise KernelError(f"{image}: no such file")
    release = image_release(image)
    digest = sha256_of(image)
    if config is None and (beside := image.parent / f"config-{release}").is_file():
        config = beside
    target = kernels_dir() / name
    if is_registered(name):
        existing = _load(target)
        if existing.meta.sha256 == digest:
            if modules is None or existing.boot_modules() is not None:
                return existing
            # The same image, now with its modules: nothing of it is replaced.
        elif not replace:
            raise KernelError(
                f"kernel {name!r} is already registered ({existing.release}, from "
                f"{existing.meta.source}); choose another --name or pass --replace"
            )
    meta = KernelMeta(name, release, source or f"file:{image.resolve()}", digest)
    try:
        needed = None if modules is None else root_disk_modules(
            modules, release, config.read_text(errors="replace") if config is not None else None
        )
    except ModulesError as exc:
        raise KernelError(str(exc)) from exc
    kernels_dir().mkdir(parents=True, exist_ok=True)
    # Built beside its final place and renamed in, so a crash never leaves half a kernel.
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=kernels_dir()))
    try:
        staging.chmod(0o755)
        shutil.copyfile(image, staging / "vmlinuz")
        if config is not None:
            shutil.copyfile(config, staging / "config")
        if needed is not None:
            (staging / MODULES).mkdir()
            for module in needed:
                (staging / MODULES / f"{module.name}.ko").write_bytes(module.data)
            order = "".join(f"{module.name}.ko\n" for module in needed)
            (staging / MODULES / MODULE_ORDER).write_text(order)
        (staging / META).write_text(json.dumps(asdict(meta), indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _load(target)


def add_deb(
    package: str,
    name: str | None = None,
    *,
    replace: bool = False,
    progress: Callable[[str], None] = lambda _: None,
) -> Kernel:
    """Download a Debian kernel package with apt and register its image and config.

    A meta-package (linux-image-cloud-amd64) is followed to the image package it
    depends on. A kernel already registered from the same package is returned
    without downloading anything, unless it was registered without its modules.
    """
    name = name or package.removeprefix("linux-image-")
    check_name(name)
    directory = kernels_dir() / name
    if (directory / META).is_file() and not replace:
        existing = _load(directory)
        if existing.meta.source.startswith((f"deb:{package}=", f"deb:{package} -> ")):
            if existing.boot_modules() is not None:
                return existing
            progress(f"kernel {name} was registered without its modules; fetching them")
        else:
            raise KernelError(
                f"kernel {name!r} is already registered from {existing.meta.source}; "
                "choose another --name or pass --replace"
            )
    require_tool("apt-get", "apt")
    require_tool("dpkg-deb", "dpkg")
    with tempfile.TemporaryDirectory(prefix="perfline-deb-") as scratch:
        work = Path(scratch)
        deb = _download(package, work, progress)
        via = ""
        if not _members(deb, "./boot/vmlinuz-"):
            depends = _image_dependency(deb)
            if depends is None:
                raise KernelError(f"{package} holds no boot/vmlinuz-* and depends on no linux-image")
            progress(f"{package} is a meta-package for {depends}")
            via = f"{package} -> "
            deb = _download(depends, work, progress)
        version = _field(deb, "Version")
        root = work / "root"
        _dpkg(["dpkg-deb", "-x", str(deb), str(root)])
        images = sorted((root / "boot").glob("vmlinuz-*"))
        if len(images) != 1:
            raise KernelError(f"{deb.name}: expected one boot/vmlinuz-*, found {len(images)}")
        release = images[0].name.removeprefix("vmlinuz-")
        config = root / "boot" / f"config-{release}"
        trees = [root / "lib" / "modules" / release, root / "usr" / "lib" / "modules" / release]
        return add_image(
            images[0],
            name,
            config=config if config.is_file() else None,
            # A package without modules (all built in) is registered as having none.
            modules=next((tree for tree in trees if tree.is_dir()), trees[0]),
            source=f"deb:{via}{_field(deb, 'Package')}={version}",
            replace=True,
        )


def check_name(name: str) -> None:
    if not NAME_PATTERN.fullmatch(name):
        raise KernelError(f"kernel name {name!r}: use letters, digits, '.', '_', '+', '-'")


def _download(package: str, into: Path, progress: Callable[[str], None]) -> Path:
    progress(f"apt-get download {package}")
    try:
        _dpkg(["apt-get", "download", "-q", package], cwd=into, timeout=APT_TIMEOUT_S)
    except KernelError as exc:
        if "Unable to locate package" in str(exc):
            raise KernelError(
                f"apt knows no package {package}: check the name with "
                "`apt-cache search linux-image | grep cloud`, or run `apt-get update`"
            ) from exc
        raise
    found = sorted(into.glob(f"{package.replace('+', '?')}_*.deb"))
    if not found:
        raise KernelError(f"apt-get download {package} left no .deb in {into}")
    return found[-1]


def _members(deb: Path, prefix: str) -> list[str]:
    listing = _dpkg(["dpkg-deb", "-c", str(deb)])
    return [line.split()[-1] for line in listing.splitlines() if line.split()[-1].startswith(prefix)]


def _image_dependency(deb: Path) -> str | None:
    for alternative in re.split(r"[,|]", _field(deb, "Depends")):
        package = alternative.strip().split(" ")[0]
        if package.startswith("linux-image-"):
            return package
    return None


def _field(deb: Path, name: str) -> str:
    return _dpkg(["dpkg-deb", "-f", str(deb), name]).strip()


def _dpkg(argv: list[str], cwd: Path | None = None, timeout: float = 120.0) -> str:
    try:
        return run(argv, cwd=cwd, timeout=timeout).stdout
    except CommandFailed as exc:
        raise KernelError(f"{exc}\n{exc.output_tail}") from exc


def _load(directory: Path) -> Kernel:
    meta = KernelMeta(**json.loads((directory / META).read_text()))
    return Kernel(meta, directory)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
