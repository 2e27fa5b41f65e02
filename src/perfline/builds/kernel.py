"""Kernel builds of a tree's commits (bisections, kernel trackers), and booting them.

`perfline bisect start --kernel-tree DIR --config FILE --job JOB` and a tracker with
`build: {kernel: ...}` build with the command this module writes and boot each build in
a VM:

- **Build** (once per commit, by `KernelBuilder`): in the commit's own worktree, copy
  the config, `make olddefconfig`, `make -j$(nproc) bzImage`, with `CC="ccache gcc"`
  when ccache is installed; the whole make output goes to `perfline-build.log`. Then
  only the bzImage, the .config and the log are kept, and the worktree (4.2 GB with a
  distribution config) is removed: a bisection's disk is its images, not its trees.
- **Measure**: the kept bzImage is registered as a kernel (`bisect-<id>-<sha12>`,
  `track-<name>-<sha12>`; again the same image: a no-op), and the job's case runs with
  target qemu and that kernel.

The bisection's record names the config (`BisectionSpec.kernel_config`), a copy in
perfline's cache under its content hash, made at start: editing the file afterwards
cannot change a bisection under way, and a different config is a different build
command, so the builder builds again.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from perfline import git
from perfline.benchmarks import BENCHMARKS
from perfline.builds.worktree import Build, Builder, cache_dir
from perfline.jobs.vm import check_guest_job
from perfline.records.errors import UserError
from perfline.records.job import Case, JobError, VmSpec
from perfline.system.process import require_tool
from perfline.targets.kernel_build import IMAGE, LOG_NAME, TREE_FILES, build_script
from perfline.targets.kernels import Kernel, add_image
from perfline.targets.qemu import QEMU, QEMU_PACKAGE

# What a build keeps of its worktree, under these names.
KEPT_IMAGE, KEPT_CONFIG = "bzImage", "config"
# The placeholder kernel of a local job's VM; every probe replaces it with its build.
UNSET = "unset"


class KernelBisectError(UserError, ValueError):
    """The kernel bisection cannot start or continue; the message says why."""


def check_tree(tree: Path, good_sha: str) -> None:
    """A git tree that has a kernel's top-level files at the good commit."""
    for name in TREE_FILES:
        if not git.has_path(tree, good_sha, name):
            raise KernelBisectError(f"--kernel-tree {tree}: not a Linux kernel tree "
                                    f"(no {name} at {good_sha[:12]})")


def keep_config(config: Path) -> Path:
    """A copy of the config under perfline's cache, named by its content."""
    if not config.is_file():
        raise KernelBisectError(f"--config {config}: no such file")
    return keep_config_bytes(config.read_bytes())


def keep_config_bytes(data: bytes) -> Path:
    """A config's bytes kept under perfline's cache, named by their content (a fleet
    job carries its tracker's config as text)."""
    kept = cache_dir() / "configs" / f"{hashlib.sha256(data).hexdigest()[:16]}.config"
    if not kept.is_file():
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(".partial")
        partial.write_bytes(data)
        partial.rename(kept)
    return kept


def build_command(config: Path) -> str:
    """The build in each commit's own worktree."""
    return build_script(config)


def check_resumable(config: Path) -> None:
    if not config.is_file():
        raise KernelBisectError(f"the bisection's copy of its config, {config}, is gone (was perfline's "
                                "cache cleared?); start the bisection again")


def vm_case(case: Case, job: str) -> Case:
    """The job's one case as it will boot: target qemu, the kernel left to each probe.

    A qemu job keeps its cmdline, vm_cpus, vm_memory and accel; a local job gets the
    VM defaults, once its benchmark and tunables are known to work in a guest.
    """
    require_tool(QEMU, QEMU_PACKAGE)
    if case.target == "qemu" and case.vm is not None:
        return case
    if case.target != "local":
        raise KernelBisectError(f"--job {job}: target {case.target!r} cannot boot a kernel; use local or qemu")

    def fail_for(key: str) -> Callable[[str], JobError]:
        return lambda message: JobError(job, None, message)

    check_guest_job(BENCHMARKS.get(case.benchmark), case.tunables, fail_for)
    return replace(case, target="qemu", vm=VmSpec(UNSET))


def kexec_case(case: Case, job: str) -> Case:
    """The job's case as a fleet machine boots it (a kernel tracker on the fleet): target
    kexec, the kernel left to each tested commit; the job's `cmdline:` goes with it."""
    if case.target not in ("local", "kexec"):
        raise KernelBisectError(f"{job}: target {case.target!r}: a kernel tracker on the fleet boots each build "
                                "on the machine itself (target kexec); give the job target local")
    return replace(case, target="kexec", vm=None, boot_kernel=UNSET)


def with_kernel(case: Case, name: str) -> Case:
    assert case.vm is not None, "vm_case() first"
    return replace(case, vm=replace(case.vm, kernel=name))


def kernel_name(bisection_id: int, sha: str) -> str:
    return f"bisect-{bisection_id}-{sha[:12]}"


def register(kept: Path, name: str, sha: str) -> Kernel:
    """The commit's kept build as a registered kernel named `name`.

    The same image again is a no-op; a rebuilt one (its kept files were deleted and
    built anew, so the build stamp differs) replaces it under the same name.
    """
    image = kept / KEPT_IMAGE
    if not image.is_file():
        raise KernelBisectError(f"{sha[:12]}: the build left no {IMAGE} (see {kept / LOG_NAME})")
    config = kept / KEPT_CONFIG
    return add_image(image, name, config=config if config.is_file() else None,
                     source=f"git:{sha} built in {kept}", replace=True)


class KernelBuilder(Builder):
    """Builds in a worktree, keeps the bzImage, .config and log, and drops the worktree.

    What is kept lives under `kernels/<build key>/<sha>` beside the worktrees, and the
    build's outcome with it, so a kept build is never built again; a kill before the
    outcome is recorded leaves the worktree with its start marker, and the build is
    run again from a fresh checkout (Builder's rules).
    """

    def __init__(self, repo: Path, build: str, announce: Callable[[str], None] = lambda _: None) -> None:
        super().__init__(repo, build, announce=announce)

    def kept(self, sha: str) -> Path:
        return self.root / "kernels" / self.key / sha

    def log_path(self, sha: str) -> Path:
        return self.kept(sha) / LOG_NAME

    def result_path(self, sha: str) -> Path:
        return self.kept(sha) / "result"

    def run_build(self, tree: Path) -> Build:
        self.announce(f"building {tree.name[:12]}: make olddefconfig && make -j bzImage, log in "
                      f"{tree / LOG_NAME} (kept as {self.log_path(tree.name)})")
        return super().run_build(tree)

    def keep(self, tree: Path, sha: str, made: Build) -> None:
        kept = self.kept(sha)
        shutil.rmtree(kept, ignore_errors=True)  # what a kill during an earlier keep left
        kept.mkdir(parents=True)
        wanted = [(LOG_NAME, LOG_NAME)]
        if made.ok:
            wanted += [(str(IMAGE), KEPT_IMAGE), (".config", KEPT_CONFIG)]
        for source, name in wanted:
            if (tree / source).is_file():
                shutil.copyfile(tree / source, kept / name)

    def done(self, sha: str) -> None:
        # Also a worktree left by a kill between recording the build and removing it.
        self.drop_tree(sha)
