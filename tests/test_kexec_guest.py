"""Target kexec for real, in a QEMU guest playing a lab machine (kexec_machine.py).

The guest boots Debian's 6.1 kernel as its firmware default. The test's driver (a unit
on the guest) opts the guest in, installs the resume unit and runs `perfline run rcu-gp
--target kexec --kernel debian-6.12`: the guest kexecs into 6.12, `perfline resume`
measures there and reboots; QEMU's reset boots 6.1 again, as firmware does. Then the
same with `init=/bin/false`, which 6.12 panics on once its root is mounted: panic=10
resets the guest, 6.1 comes back and resume records the boot `boot-failed` with the
panic from pstore. The store is the tests' PostgreSQL on this host, which the guest
reaches at 10.0.2.2 through QEMU's user-mode network. Only the guest is ever kexec'd.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kexec_machine import DEFAULT_CMDLINE, PYTHON_HOME, TEST_DISK_MOUNT, VENV, boot_files, machine_image
from perfline.store import Store
from perfline.system.pgserver import HOST, PrivateServer
from perfline.targets.kernels import Kernel

pytestmark = [pytest.mark.slow, pytest.mark.vm]

CHECKOUT = Path(__file__).resolve().parents[1]
# Under TCG on a loaded 2-CPU host: five boots of systemd, a kexec, a panic and its
# 10 s, and seven perfline commands in the guest, each 70-120 s at a load average of
# 12-15 (Python's start-up and imports under emulation).
GUEST_TIMEOUT_S = 3600.0
DRIVER = """\
#!/bin/sh
# The test's steps, one per boot of the default kernel; the step number is kept on the
# root disk, whose QEMU overlay lives across the guest's reboots and kexecs.
[ "$(uname -r)" = "{default}" ] || exit 0
export PYTHONPATH={mount}/src PERFLINE_CACHE_DIR={mount}/cache PERFLINE_DB={db}
perfline() {{ {python} -m perfline "$@"; }}
step=$(cat /var/lib/perfline-test-step 2>/dev/null || echo 0)
echo "@perfline-test step $step on $(uname -r)"
case $step in
0)  echo 1 > /var/lib/perfline-test-step
    perfline kernels allow-kexec && perfline kernels install-resume || systemctl poweroff
    perfline run rcu-gp -p iterations=2 --repeat 3 --warmup 0 --no-monitors --label kexec-6.12 \\
        --target kexec --kernel debian-6.12 || {{ echo "@perfline-test run failed"; systemctl poweroff; }} ;;
1)  echo 2 > /var/lib/perfline-test-step
    perfline run rcu-gp -p iterations=2 --repeat 3 --warmup 0 --no-monitors --label panics \\
        --target kexec --kernel debian-6.12 --cmdline init=/bin/false \\
        || {{ echo "@perfline-test run failed"; systemctl poweroff; }} ;;
*)  echo "@perfline-test done"
    systemctl poweroff ;;
esac
"""


def test_the_lab_machine_kexecs_into_612_measures_comes_back_and_a_panic_is_boot_failed(
    tmp_path: Path, debian_kernels: dict[str, Kernel], postgres_server: PrivateServer
) -> None:
    from test_qemu_target import TEST_CACHE

    default, tested = debian_kernels["debian-6.1"], debian_kernels["debian-6.12"]
    image = machine_image(TEST_CACHE, [default, tested])
    initrd = boot_files(image, default.release, image.parent)
    url = postgres_server.create_database("kexec_guest")
    disk = guest_disk(tmp_path, url.replace(f"@{HOST}:", "@10.0.2.2:"), default.release, [default, tested])
    console = tmp_path / "console.log"
    qemu = subprocess.Popen(
        # -cpu max: numpy's wheels need x86-64-v2 instructions (SSE4.2, POPCNT), which
        # TCG's default CPU model lacks (the guest's python died of "invalid opcode").
        ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "2",
         "-kernel", str(default.image), "-initrd", str(initrd), "-append", DEFAULT_CMDLINE,
         "-drive", f"file={image},if=virtio,format=raw,snapshot=on",
         "-drive", f"file={disk},if=virtio,format=raw",
         "-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0",
         "-nographic", "-nodefaults", "-monitor", "none", "-serial", f"file:{console}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        qemu.wait(GUEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        qemu.kill()
        qemu.wait()
    text = console.read_text(errors="replace")
    assert "@perfline-test done" in text, f"the guest did not finish; its console ended:\n{text[-6000:]}"

    store = Store.open(url)
    first, second = sorted(store.kexec_boots(), key=lambda boot: boot.id)
    assert (first.state, first.kernel, first.release) == ("returned", "debian-6.12", tested.release), first
    assert first.error is None and first.default_release == default.release
    [run_id] = first.run_ids
    detail = store.get_run(run_id)
    fingerprint = detail.fingerprint
    assert detail.info.status == "completed" and detail.info.label == "kexec-6.12"
    assert fingerprint["kernel_release"] == tested.release and fingerprint["target"] == "kexec"
    assert fingerprint["boot"] == {"how": "kexec", "from": default.release, "kernel": "debian-6.12",
                                   "image sha256": tested.meta.sha256}
    assert "panic=10 oops=panic perfline.boot=" in fingerprint["cmdline"]
    assert len({s.repetition for s in detail.samples}) == 3
    # The job ran once: one run under its label, none for the kernel that did not boot.
    labels = [run.label for run in store.list_runs(50)]
    assert labels.count("kexec-6.12") == 1 and "panics" not in labels

    assert second.state == "boot-failed" and second.run_ids == [], second
    assert f"runs {default.release}, not booted by perfline" in str(second.error)
    assert "Attempted to kill init" in str(second.console), second.console
    assert "pstore" in str(second.console)
    assert text.count("Linux version 6.12") >= 2 and text.count(f"Linux version {default.release}") >= 3


def guest_disk(tmp: Path, db_url: str, default_release: str, kernels: list[Kernel]) -> Path:
    """The second disk: the project's sources and helpers, the kernel registry, the driver."""
    staging = tmp / "disk"
    shutil.copytree(CHECKOUT / "src", staging / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(CHECKOUT / "native" / "build", staging / "native" / "build")
    for kernel in kernels:
        shutil.copytree(kernel.directory, staging / "cache" / "kernels" / kernel.name)
    python = VENV / "bin" / "python"
    assert PYTHON_HOME.is_dir()
    (staging / "driver.sh").write_text(DRIVER.format(default=default_release, mount=TEST_DISK_MOUNT, db=db_url,
                                                     python=python))
    disk = tmp / "test.ext4"
    with disk.open("wb") as out:
        out.truncate(512 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(staging), str(disk)], check=True, timeout=300)
    return disk

