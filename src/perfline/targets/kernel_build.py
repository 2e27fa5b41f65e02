"""Building a kernel's bzImage from a source tree: the one recipe that `perfline kernels
build`, kernel bisections and kernel-tree trackers use.

The config is copied to `.config`, `make olddefconfig` fills in what it does not say,
and `make -j$(nproc) bzImage` builds only what is built in (a guest boots modules from
an initramfs only where perfline packs them), with `CC="ccache gcc"` when ccache is
installed; the whole make output goes to `perfline-build.log` in the build directory.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfline.system.process import tail
from perfline.targets.kernels import Kernel, KernelError, add_image, cache_dir, check_name, is_registered

LOG_NAME = "perfline-build.log"
# One JSON line per build in a build directory: when, how long, ccache's hits and misses.
BUILDS_NAME = "perfline-builds.jsonl"
IMAGE = Path("arch/x86/boot/bzImage")
# Files a directory must have to be taken for a kernel source tree.
TREE_FILES = ("Makefile", "Kconfig", "arch/x86/Kconfig")

# Run by `sh -c` in the build directory. ccache keys include the working directory when
# compiling with -g (the default of a distribution config); a bisection builds every
# commit in its own worktree, so without CCACHE_NOHASHDIR no object would be reused.
SCRIPT = """\
cp {config} .config || exit 1
if command -v ccache >/dev/null 2>&1; then
    set -- CC="ccache gcc"
    export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
fi
{{
    echo "perfline: make olddefconfig $*"
    {make} olddefconfig "$@" &&
    echo "perfline: make -j$(nproc) bzImage $*" &&
    {make} -j"$(nproc)" bzImage "$@"
}} >{log} 2>&1
status=$?
echo "perfline: exit status $status" >>{log}
tail -n 60 {log}
exit $status
"""


def build_script(config: Path, source: Path | None = None) -> str:
    """The build, in the directory it runs in: the source tree itself, or with `source`
    an out-of-tree build there (`make -C SOURCE O=$PWD`), which leaves the tree clean
    so that one tree serves several configs at once."""
    make = "make" if source is None else f'make -C {shlex.quote(str(source))} O="$PWD"'
    return SCRIPT.format(config=shlex.quote(str(config)), log=LOG_NAME, make=make)


def is_kernel_tree(directory: Path) -> bool:
    return all((directory / name).is_file() for name in TREE_FILES)


class KernelBuildFailed(KernelError):
    """make failed; the message has the log's tail and where the whole log is."""


@dataclass(frozen=True)
class Built:
    kernel: Kernel
    seconds: float
    directory: Path  # the build directory: the log, .config and objects stay there
    # Every build made in that directory, this one last: the first says what a build
    # from nothing cost, the later ones are incremental.
    builds: list[dict[str, Any]]


def build_kernel(source: Path, config: Path, name: str, *, replace: bool = False) -> Built:
    """Build `source` with `config` out of tree and register the bzImage as `name`.

    The build directory is keyed by the tree's path and the config's content, so the
    same pair again is an incremental `make` (seconds), and another config of the same
    tree builds beside it.
    """
    source = source.expanduser().resolve()
    if not is_kernel_tree(source):
        missing = [n for n in TREE_FILES if not (source / n).is_file()]
        raise KernelError(f"{source}: not a Linux kernel source tree (no {', '.join(missing)})")
    if not config.is_file():
        raise KernelError(f"--config {config}: no such file")
    # The name is checked before a build of many minutes, not after it, when the image is registered.
    check_name(name)
    if is_registered(name) and not replace:
        raise KernelError(f"a kernel named {name!r} is registered already; give --replace to build it again")
    if (source / ".config").exists():
        raise KernelError(f"{source} has a .config: an out-of-tree build needs a clean tree "
                          f"(`make -C {source} mrproper` cleans it)")
    data = config.read_bytes()
    key = hashlib.sha256(str(source).encode() + b"\0" + data).hexdigest()[:16]
    directory = cache_dir() / "builds" / key
    directory.mkdir(parents=True, exist_ok=True)
    kept = directory / "input.config"  # the config as given: an edit later builds elsewhere
    kept.write_bytes(data)
    cached_before = ccache_counts()
    started = time.monotonic()
    proc = subprocess.run(["/bin/sh", "-c", build_script(kept, source)], cwd=directory,
                          capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    record: dict[str, Any] = {"finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
                              "seconds": round(seconds, 1), "status": proc.returncode}
    if cached_before is not None and (cached_after := ccache_counts()) is not None:
        # Counters are ccache's, machine-wide: another build at the same time would count too.
        record.update({counter: cached_after[counter] - cached_before[counter] for counter in cached_after})
    with (directory / BUILDS_NAME).open("a") as builds:
        builds.write(json.dumps(record) + "\n")
    if proc.returncode != 0:
        raise KernelBuildFailed(f"building {source} with {config} failed (status {proc.returncode}; the whole log is "
                          f"{directory / LOG_NAME}):\n{tail(proc.stdout + proc.stderr, 20)}")
    kernel = add_image(directory / IMAGE, name, config=directory / ".config",
                       source=f"built from {source} with {config.name} in {directory}", replace=replace)
    history = [json.loads(line) for line in (directory / BUILDS_NAME).read_text().splitlines()]
    return Built(kernel, seconds, directory, history)


def ccache_counts() -> dict[str, int] | None:
    """ccache's own hit and miss counters now; None without ccache."""
    if shutil.which("ccache") is None:
        return None
    proc = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True, check=False)
    stats = dict(line.split("\t", 1) for line in proc.stdout.splitlines() if "\t" in line)
    try:
        return {"ccache_hits": int(stats["direct_cache_hit"]) + int(stats["preprocessed_cache_hit"]),
                "ccache_misses": int(stats["cache_miss"])}
    except (KeyError, ValueError):  # a ccache older than 4.4 prints no machine-readable stats
        return None
