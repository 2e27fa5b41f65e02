"""The guest's Debian root file system: its cache key, builds cut short, the kernel
modules a root disk needs, and (marked vm) pgbench and sched-pipe run on it in a guest.

The real image is built once into the qemu tests' fixed cache (debootstrap from the
Debian mirror: minutes) and kept there; the build tests here stand a fake debootstrap
in for the real one, so that they take a second and can be killed at will.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_qemu_target import TEST_CACHE, run_json

from perfline.benchmarks import rootfs_packages
from perfline.targets import kernels, rootfs
from perfline.targets.bootmodules import ROOT_DISK_DRIVERS
from perfline.targets.rootfs import RootfsError, RootfsSpec

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="debootstrap and mount need root")

# Stands in for debootstrap: makes a small tree in the target (the argument before the
# mirror). With HANG set it first mounts a tmpfs on the target's /proc, as the real one
# does while it configures packages, and waits to be killed.
FAKE_DEBOOTSTRAP = """#!/bin/sh
eval target=\\${$(($# - 1))}
echo $$ > "$FAKE_PID"
mkdir -p "$target/etc" "$target/proc" "$target/var/cache/apt/archives"
echo leftover > "$target/var/cache/apt/archives/some.deb"
if [ -n "$HANG" ]; then
    mount -t tmpfs fake-debootstrap "$target/proc"
    exec sleep 600
fi
echo built > "$target/etc/marker"
"""


def test_rootfs_key_follows_its_inputs() -> None:
    base = RootfsSpec(("postgresql", "linux-perf"), mirror="http://mirror.example/debian")
    same = RootfsSpec(("linux-perf", "postgresql", "postgresql"), mirror="http://mirror.example/debian/")
    assert same.key == base.key  # order, repeats and a trailing slash change nothing
    others = [
        RootfsSpec(("postgresql",), mirror=base.mirror),
        RootfsSpec(("postgresql", "linux-perf", "dbench"), mirror=base.mirror),
        RootfsSpec(base.packages, suite="trixie", mirror=base.mirror),
        RootfsSpec(base.packages, mirror="http://other.example/debian"),
    ]
    assert len({base.key, *(spec.key for spec in others)}) == 1 + len(others)
    # Declared by the benchmarks that need it; tbench (dbench) runs on the host only.
    assert {"postgresql", "linux-perf"} <= set(rootfs_packages()) and "dbench" not in rootfs_packages()


def fake_tools(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "debootstrap").write_text(FAKE_DEBOOTSTRAP)
    (bin_dir / "debootstrap").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_PID": str(tmp_path / "pid")}


@as_root
def test_a_build_killed_halfway_is_never_trusted_and_is_cleaned_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, spec = tmp_path / "cache", RootfsSpec(("postgresql",), mirror="http://mirror.example/debian")
    env = fake_tools(tmp_path)
    code = f"from perfline.targets import rootfs; rootfs.build(rootfs.{spec!r}, __import__('pathlib').Path({str(cache)!r}))"
    builder = subprocess.Popen([sys.executable, "-c", code], env={**env, "HANG": "1"})
    staging = cache / "rootfs" / f"{spec.key}.partial"
    deadline = time.monotonic() + 30
    while f"{staging}/proc " not in Path("/proc/self/mounts").read_text():
        assert time.monotonic() < deadline and builder.poll() is None, "the fake debootstrap never mounted"
        time.sleep(0.05)
    debootstrap = int((tmp_path / "pid").read_text())
    builder.send_signal(signal.SIGKILL)
    builder.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{debootstrap}").exists():  # pdeathsig: it dies with perfline
        assert time.monotonic() < deadline, "debootstrap outlived the perfline that started it"
        time.sleep(0.05)
    assert rootfs.cached(spec, cache) is None  # the leftovers are not an image
    assert staging.is_dir()

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    said: list[str] = []
    image = rootfs.build(spec, cache, progress=said.append)
    assert image == rootfs.cached(spec, cache) and image.name == f"{spec.key}.ext4"
    assert "building the guest root file system" in said[0]
    assert f"{staging}/" not in Path("/proc/self/mounts").read_text()  # unmounted, then removed
    assert sorted(p.name for p in image.parent.iterdir()) == [image.name, f"{spec.key}.lock"]
    marker = subprocess.run(
        ["debugfs", "-R", "cat /etc/marker", str(image)], capture_output=True, text=True, check=True
    ).stdout
    assert marker == "built\n"
    listing = subprocess.run(
        ["debugfs", "-R", "ls /var/cache/apt/archives", str(image)], capture_output=True, text=True, check=True
    ).stdout
    assert "some.deb" not in listing  # build leftovers are not packed
    built = image.stat().st_mtime_ns
    assert rootfs.build(spec, cache, progress=said.append) == image
    assert image.stat().st_mtime_ns == built and len(said) == 1  # cached: not built again


def fake_bzimage(path: Path, release: str) -> Path:
    """The smallest file whose setup header names `release` (see kernels.image_release)."""
    image = bytearray(0x1000)
    image[0x202:0x206] = b"HdrS"
    image[0x20E:0x210] = (0x600).to_bytes(2, "little")
    image[0x800 : 0x800 + len(release) + 1] = release.encode() + b"\0"
    path.write_bytes(bytes(image))
    return path


def test_a_kernel_without_the_root_disk_drivers_names_the_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "cache"))
    image = fake_bzimage(tmp_path / "bzImage", "6.9.0-test")
    config = tmp_path / "config-6.9.0-test"
    config.write_text("".join(f"{option}=y\n" for option, _ in ROOT_DISK_DRIVERS))
    assert rootfs.initramfs_files(kernels.add_image(image, "builtin")) == {"perfline/root": b"/dev/vda\n"}
    config.write_text(config.read_text().replace("CONFIG_VIRTIO_BLK=y", "CONFIG_VIRTIO_BLK=m"))
    modular = kernels.add_image(image, "modular", modules=tmp_path / "no-modules-here")
    assert modular.boot_modules() == []
    with pytest.raises(RootfsError, match=r"build it with CONFIG_VIRTIO_BLK=y, or register it"):
        rootfs.initramfs_files(modular)


# -- with Debian's kernels (vm: downloaded with apt once) -------------------------------


@pytest.mark.vm
def test_debian_kernels_keep_their_root_disk_modules(
    debian_kernels: dict[str, kernels.Kernel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(kernels.CACHE_ENV, str(TEST_CACHE))
    k61, k612 = debian_kernels["debian-6.1"], debian_kernels["debian-6.12"]
    # 6.1 builds virtio and virtio_pci as modules too; dependencies load first.
    names = [p.stem for p in k61.boot_modules() or []]
    assert names.index("virtio") < names.index("virtio_pci") < names.index("virtio_blk")
    assert [p.stem for p in k612.boot_modules() or []] == ["virtio_blk"]

    # `kernels add IMAGE --modules DIR` takes them from a /lib/modules/RELEASE tree.
    tree = tmp_path / "lib" / "modules" / k61.release
    (tree / "kernel").mkdir(parents=True)
    for module in k61.boot_modules() or []:
        shutil.copy(module, tree / "kernel")
    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "cache"))
    subprocess.run(
        [sys.executable, "-m", "perfline", "kernels", "add", str(k61.image), "--name", "mine",
         "--config", str(k61.config_path), "--modules", str(tree)],
        check=True, capture_output=True,
    )  # fmt: skip
    assert [p.stem for p in kernels.get_kernel("mine").boot_modules() or []] == names
    with pytest.raises(kernels.KernelError, match=re.escape(f"built for {k61.release}, not for {k612.release}")):
        kernels.add_image(k612.image, "mismatched", config=k612.config_path, modules=tree)


@pytest.mark.vm
@as_root
def test_pgbench_and_sched_pipe_run_on_the_root_file_system_in_a_guest(
    debian_kernels: dict[str, kernels.Kernel], tmp_path: Path
) -> None:
    kernel = debian_kernels["debian-6.12"]
    db = tmp_path / "db"
    vm = ["--target", "qemu", "--kernel", kernel.name, "--accel", "tcg"]
    pgbench = run_json(
        db, "pgbench", "-p", "scale=1", "-p", "duration=2", "--repeat", "2", *vm
    )
    assert pgbench["status"] == "completed", (pgbench["error"], pgbench["output_tail"])
    tps = [s["value"] for s in pgbench["samples"] if s["metric"] == "pgbench.tps"]
    assert len(tps) == 2 and min(tps) > 0
    fingerprint, settings = pgbench["fingerprint"], pgbench["settings"]
    assert fingerprint["kernel_release"] == kernel.release != os.uname().release
    assert settings["postgres_version"].startswith("postgres (PostgreSQL) ")
    image = rootfs.rootfs_dir(TEST_CACHE) / f"{settings['vm_rootfs']}.ext4"
    written = image.stat().st_mtime_ns

    pipe = run_json(db, "sched-pipe", "-p", "loops=2000", "--repeat", "2", *vm)
    assert pipe["status"] == "completed", (pipe["error"], pipe["output_tail"])
    assert len([s for s in pipe["samples"] if s["metric"] == "sched-pipe.usecs_per_op"]) == 2
    assert pipe["fingerprint"]["kernel_release"] == kernel.release
    assert pipe["settings"]["perf"].startswith("perf version ")
    assert pipe["settings"]["vm_rootfs"] == settings["vm_rootfs"]  # one image serves both
    assert image.stat().st_mtime_ns == written  # the guests wrote to throwaway overlays
