"""Target kexec for real, in a QEMU guest playing a lab machine (kexec_machine.py).

The guest boots Debian's 6.1 kernel as its firmware default. The test's driver (a unit
on the guest) opts the guest in, installs the resume unit and runs `perfline run rcu-gp
--target kexec --kernel debian-6.12`: the guest kexecs into 6.12, `perfline resume`
measures there and reboots; QEMU's reset boots 6.1 again, as firmware does. Then the
same with `init=/bin/false`, which 6.12 panics on once its root is mounted: panic=10
resets the guest, 6.1 comes back and resume records the boot `boot-failed` with the
panic from pstore. The store is the tests' PostgreSQL on this host, which the guest
reaches at 10.0.2.2 through QEMU's user-mode network. Only the guest is ever kexec'd.
The fallback where kexec is refused (`boot: reboot`) is tested with the guest booting
through the real GRUB at every reset (kexec_machine.grub_disk).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kexec_machine import (
    DEFAULT_CMDLINE,
    PYTHON_HOME,
    TEST_DISK_MOUNT,
    VENV,
    boot_files,
    grub_disk,
    machine_image,
    panicking_kernel,
)
from perfline.store import RunDetail, Store
from perfline.store.kexec_boots import KexecBoot
from perfline.system.pgserver import HOST, PrivateServer
from perfline.targets.kernels import CACHE_ENV, Kernel
from test_fleet_kernels import TRACKER, kernel_tree

pytestmark = [pytest.mark.slow, pytest.mark.vm]

CHECKOUT = Path(__file__).resolve().parents[1]
# Under TCG on a loaded 2-CPU host: five boots of systemd, a kexec, a panic and its
# 10 s, and seven perfline commands in the guest, each 70-120 s at a load average of
# 12-15 (Python's start-up and imports under emulation).
GUEST_TIMEOUT_S = 3600.0
# The drivers' first step, after their checks of the boot: the store and the code on the
# second disk, the step kept on the root disk (whose QEMU overlay lives across the
# guest's reboots and kexecs), and the machine's opt-in at step 0.
FIRST_STEP = """\
export PYTHONPATH={mount}/src PERFLINE_CACHE_DIR={mount}/cache PERFLINE_DB={db}
perfline() {{ {python} -m perfline "$@"; }}
step=$(cat /var/lib/perfline-test-step 2>/dev/null || echo 0)
echo "@perfline-test step $step on $(uname -r)"
case $step in
0)  echo 1 > /var/lib/perfline-test-step
    perfline kernels allow-kexec && perfline kernels install-resume || systemctl poweroff
"""
DRIVER = """\
#!/bin/sh
# The test's steps, one per boot of the default kernel.
[ "$(uname -r)" = "{default}" ] || exit 0
""" + FIRST_STEP + """\
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
    default, tested = debian_kernels["debian-6.1"], debian_kernels["debian-6.12"]
    url = postgres_server.create_database("kexec_guest")
    driver = DRIVER.format(default=default.release, mount=TEST_DISK_MOUNT, db=guest_url(url),
                           python=VENV / "bin" / "python")
    disk = guest_disk(tmp_path, driver, {f"cache/kernels/{k.name}": k.directory for k in (default, tested)})
    text = run_guest(tmp_path, default, tested, disk)
    assert "@perfline-test done" in text, f"the guest did not finish; its console ended:\n{text[-6000:]}"

    store = Store.open(url)
    first, second = sorted(store.kexec_boots(), key=lambda boot: boot.id)
    fingerprint = returned_run(store, first, default, tested, "kexec-6.12", "kexec").fingerprint
    assert str(first.watchdog).startswith("none armed by perfline")
    assert "panic=10 oops=panic perfline.boot=" in fingerprint["cmdline"]
    # The job ran once: one run under its label, none for the kernel that did not boot.
    labels = [run.label for run in store.list_runs(50)]
    assert labels.count("kexec-6.12") == 1 and "panics" not in labels

    assert second.state == "boot-failed" and second.run_ids == [], second
    assert f"runs {default.release}, not booted by perfline" in str(second.error)
    assert "Attempted to kill init" in str(second.console), second.console
    assert "pstore" in str(second.console)
    assert text.count("Linux version 6.12") >= 2 and text.count(f"Linux version {default.release}") >= 3


FLEET_DRIVER = """\
#!/bin/sh
# The lab machine as a fleet worker of class kexec-lab: one worker per boot of the
# default kernel, each taking one kernel job and booting it (the tracker on the host
# queued them); `perfline resume` measures and ends each job after its boot.
[ "$(uname -r)" = "{default}" ] || exit 0
export PYTHONPATH={mount}/src PERFLINE_CACHE_DIR={mount}/cache PERFLINE_DB={db} PERFLINE_FLEET_IMAGES={mount}/images
perfline() {{ {python} -m perfline "$@"; }}
serve() {{
    # 0: the worker stopped; 130: systemd stopped it for the boot it asked for. Anything
    # else is a failure (never a poweroff while the machine kexecs).
    perfline worker --machine lab --class kexec-lab; rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 130 ] || {{ echo "@perfline-test worker failed ($rc)"; systemctl poweroff; }}
}}
step=$(cat /var/lib/perfline-test-step 2>/dev/null || echo 0)
echo "@perfline-test step $step on $(uname -r)"
case $step in
0)  echo 1 > /var/lib/perfline-test-step
    perfline kernels allow-kexec && perfline kernels install-resume || systemctl poweroff
    serve ;;
1)  echo 2 > /var/lib/perfline-test-step
    serve ;;
*)  perfline fleet drain lab
    echo "@perfline-test done"
    systemctl poweroff ;;
esac
"""
def test_a_kernel_tracker_on_the_fleet_with_the_lab_machine_as_worker(
    tmp_path: Path, debian_kernels: dict[str, Kernel], postgres_server: PrivateServer
) -> None:
    """Two kernel "commits" tracked on the fleet: Debian's 6.12, and a kernel built from
    Debian's Linux source that panics at boot (kexec_machine.panicking_kernel). Their
    builds are in the fleet's image directory, as another worker would have left them;
    the guest, a worker of the class, boots each: 6.12 is measured, the other is
    `boot-failed` and its commit untestable."""
    from test_qemu_target import TEST_CACHE

    default, tested = debian_kernels["debian-6.1"], debian_kernels["debian-6.12"]
    panicking = panicking_kernel(TEST_CACHE)
    url = postgres_server.create_database("kexec_fleet_guest")
    good, panics = kernel_tree(tmp_path / "linux", ("6.12", "a change whose kernel panics at boot"))
    (tmp_path / "tiny.config").write_text("CONFIG_EXAMPLE=y\n")
    (tmp_path / "tracker.yaml").write_text(TRACKER.replace("since: HEAD~2", "since: HEAD~1"))
    key = hashlib.sha256((tmp_path / "tiny.config").read_bytes()).hexdigest()[:16]
    images = tmp_path / "images"
    for sha, image, config in ((good, tested.image, tested.config_path),
                               (panics, panicking / "bzImage", panicking / "config")):
        (images / key / sha).mkdir(parents=True)
        shutil.copyfile(image, images / key / sha / "bzImage")
        shutil.copyfile(config, images / key / sha / "config")
    driver = FLEET_DRIVER.format(default=default.release, mount=TEST_DISK_MOUNT, db=guest_url(url),
                                 python=VENV / "bin" / "python")
    disk = guest_disk(tmp_path, driver, {"images": images})
    env = {**os.environ, "PERFLINE_DB": url, CACHE_ENV: str(tmp_path / "cache")}
    with (tmp_path / "track.log").open("w") as log:
        tracking = subprocess.Popen([sys.executable, "-m", "perfline", "track", "run", str(tmp_path / "tracker.yaml"),
                                     "--once"], env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        text = run_guest(tmp_path, default, tested, disk)
        assert "@perfline-test done" in text, f"the guest did not finish; its console ended:\n{text[-6000:]}"
        assert tracking.wait(timeout=600) == 0, (tmp_path / "track.log").read_text()
    finally:
        if tracking.poll() is None:
            tracking.kill()
            tracking.wait()
    tracked = (tmp_path / "track.log").read_text()

    store = Store.open(url)
    boots = {boot.kernel_commit: boot for boot in store.kexec_boots()}
    assert set(boots) == {good, panics}, boots
    assert boots[good].state == "returned" and boots[good].release == tested.release, boots[good]
    [run_id] = boots[good].run_ids
    detail = store.get_run(run_id)
    assert detail.info.status == "completed" and detail.info.label == "lab" and detail.info.kernel_commit == good
    assert detail.fingerprint["kernel_release"] == tested.release
    assert detail.fingerprint["boot"]["how"] == "kexec" and detail.fingerprint["boot"]["from"] == default.release
    assert boots[panics].state == "boot-failed" and boots[panics].run_ids == [], boots[panics]
    # The tested kernel's panic on the serial console (the 6.12 boot measured; nothing else panics).
    assert "Kernel panic - not syncing" in text, text[-6000:]
    attempts = {a.job_id: a for a in store.attempts()}
    assert sorted(a.state for a in attempts.values()) == ["failed", "succeeded"], attempts
    [failed] = [a for a in attempts.values() if a.state == "failed"]
    assert str(failed.error).startswith("boot-failed: "), failed
    assert "untestable: its kernel did not boot" in tracked, tracked
    labels = [run.label for run in store.list_runs(50)]
    assert labels.count("lab") == 1 and labels.count("fleet-health") >= 2, labels
    status = json.loads(subprocess.run([sys.executable, "-m", "perfline", "track", "status", "lab", "--json"],
                                       env=env, capture_output=True, text=True, timeout=120, check=True).stdout)
    assert status[0]["tested"] == 1 and status[0]["pending"] == 0, status


AB_DRIVER = """\
#!/bin/sh
# `ab --target kexec` on the lab machine: side A on the default kernel's own image
# (kexec'd into again), side B on 6.12, one block each. The resume unit boots the next
# block and compares; this driver only starts the ab, and powers off once it is over.
[ "$(uname -r)" = "{default}" ] || exit 0
grep -q perfline.boot= /proc/cmdline && exit 0   # side A's boot: the resume unit's
""" + FIRST_STEP + """\
    perfline ab rcu-gp -p iterations=2 --warmup 0 --no-monitors --label ab-kexec --target kexec \\
        --a kernel:debian-6.1 --b kernel:debian-6.12 --pairs 2 --blocks 1 \\
        || {{ echo "@perfline-test ab failed"; systemctl poweroff; }} ;;
*)  state=$(perfline kernels series 1 --json | {python} -c 'import json, sys; print(json.load(sys.stdin)["state"])')
    [ "$state" = open ] && {{ echo "@perfline-test the ab goes on"; exit 0; }}
    echo "@perfline-test done ($state)"
    systemctl poweroff ;;
esac
"""


def test_an_ab_over_kexec_boots_on_the_lab_machine(
    tmp_path: Path, debian_kernels: dict[str, Kernel], postgres_server: PrivateServer
) -> None:
    """The sides on 6.1 and 6.12, one boot each: the ab goes on from the store after
    each boot (the resume unit boots B once A is back) and compares at the end."""
    default, tested = debian_kernels["debian-6.1"], debian_kernels["debian-6.12"]
    url = postgres_server.create_database("kexec_ab_guest")
    driver = AB_DRIVER.format(default=default.release, mount=TEST_DISK_MOUNT, db=guest_url(url),
                              python=VENV / "bin" / "python")
    disk = guest_disk(tmp_path, driver, {f"cache/kernels/{k.name}": k.directory for k in (default, tested)})
    text = run_guest(tmp_path, default, tested, disk)
    assert "@perfline-test done (done)" in text, f"the guest did not finish; its console ended:\n{text[-6000:]}"

    store = Store.open(url)
    [series] = store.kexec_series_list()
    assert (series.kind, series.state) == ("ab", "done") and [s["side"] for s in series.steps] == ["A", "B"]
    boots = store.series_boots(series.id)
    assert [(b.kernel, b.state, b.series_step) for b in boots] == [
        ("debian-6.1", "returned", 0), ("debian-6.12", "returned", 1)], boots
    for boot, kernel in zip(boots, (default, tested), strict=True):
        [run_id] = boot.run_ids
        detail = store.get_run(run_id)
        assert detail.info.status == "completed" and detail.info.label == "ab-kexec"
        assert detail.fingerprint["kernel_release"] == kernel.release
        assert detail.fingerprint["boot"]["how"] == "kexec" and detail.fingerprint["boot"]["from"] == default.release
        assert len({s.repetition for s in detail.samples}) == 2
    # The comparison was printed by the resume unit after the last block.
    assert "ab series 1: all 2 blocks measured; comparing" in text, text[-6000:]
    assert text.count("Linux version 6.12") >= 1


WATCHDOG_JOB = """\
benchmark: rcu-gp
params: {iterations: 2}
repeat: 3
warmup: 0
target: kexec
kernel: debian-6.12
# Above the time from systemd's last ping on the way down to the hang: 60 s was not, under
# TCG on a loaded host (purgatory's checksums and the boot to the initramfs took longer, and
# the watchdog reset the kernel before its init ran).
watchdog: 180
# After perfline's panic=10: the kernel's init exits, it panics, and then waits forever.
cmdline: init=/bin/false panic=0
"""
WATCHDOG_DRIVER = """\
#!/bin/sh
# A tested kernel that hangs: only the watchdog the job asked for can bring the machine back.
[ "$(uname -r)" = "{default}" ] && ! grep -q perfline.boot= /proc/cmdline || exit 0
""" + FIRST_STEP + """\
    perfline run {mount}/jobs/hangs.yaml --label hangs --no-monitors \\
        || {{ echo "@perfline-test run failed"; systemctl poweroff; }} ;;
*)  echo "@perfline-test done"
    systemctl poweroff ;;
esac
"""


def test_a_kernel_that_hangs_is_reset_by_the_jobs_watchdog_and_is_boot_failed(
    tmp_path: Path, debian_kernels: dict[str, Kernel], postgres_server: PrivateServer
) -> None:
    """The lab machine's hardware watchdog is QEMU's i6300esb (its reset action a machine
    reset, as a chipset's is). The default kernel is 6.12 here (Debian's 6.1 cloud kernel
    has no i6300esb driver), booted with watchdog.stop_on_reboot=0 so that the kexec does
    not stop the timer its systemd armed (KExecWatchdogSec, from the job's `watchdog: 180`).
    The tested kernel's init exits and, with the job's panic=0 after perfline's panic=10,
    it panics and hangs: no panic reset, no systemd to pet the watchdog. The watchdog
    resets the guest, the default kernel comes back, and the boot is `boot-failed`."""
    default, tested = debian_kernels["debian-6.1"], debian_kernels["debian-6.12"]
    url = postgres_server.create_database("kexec_watchdog_guest")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "hangs.yaml").write_text(WATCHDOG_JOB)
    driver = WATCHDOG_DRIVER.format(default=tested.release, mount=TEST_DISK_MOUNT, db=guest_url(url),
                                    python=VENV / "bin" / "python")
    disk = guest_disk(tmp_path, driver, {"jobs": jobs, **{f"cache/kernels/{k.name}": k.directory
                                                          for k in (default, tested)}})
    text = run_guest(tmp_path, default, tested, disk, firmware=tested,
                     append=f"{DEFAULT_CMDLINE} watchdog.stop_on_reboot=0",
                     hardware=("-device", "i6300esb", "-action", "watchdog=reset"))
    assert "@perfline-test done" in text, f"the guest did not finish; its console ended:\n{text[-6000:]}"

    store = Store.open(url)
    [boot] = store.kexec_boots()
    assert boot.state == "boot-failed" and boot.run_ids == [], boot
    assert "systemd.watchdog_sec=180 watchdog.open_timeout=180 perfline.boot=" in boot.cmdline
    assert boot.cmdline.endswith("init=/bin/false panic=0")
    assert str(boot.watchdog).startswith("i6300ESB timer (") and "180 s: armed across the kexec" in str(boot.watchdog)
    assert "Attempted to kill init" in str(boot.console), boot.console
    # QEMU's i6300esb keeps its timeout flag across the reset it made, as a chipset does.
    assert str(boot.error).endswith("the watchdog reset the machine (i6300ESB timer (/dev/watchdog0) says so in "
                                    "its bootstatus)"), boot.error
    # The tested kernel panicked with panic=0 (no reset of its own) and yet the machine came back.
    assert "Rebooting in" not in text.split("Attempted to kill init", 1)[1].split("Linux version", 1)[0]
    assert text.count("Linux version 6.12") >= 3, text[-6000:]
    assert "hangs" not in [run.label for run in store.list_runs(50)]


REBOOT_DRIVER = """\
#!/bin/sh
# `boot: reboot` where kexec is refused: every boot goes through GRUB (kexec_machine.grub_disk).
[ "$(uname -r)" = "{default}" ] || exit 0
""" + FIRST_STEP + """\
    # The lab machine's GRUB set-up (/etc/default/grub pins 6.1), then kexec refused for real:
    # kexec_load_disabled cannot be set back to 0 before the next boot.
    update-grub && cp /boot/grub/grub.cfg /var/lib/perfline-test-grub.cfg && sysctl kernel.kexec_load_disabled=1 \\
        || {{ echo "@perfline-test set-up failed"; systemctl poweroff; exit 1; }}
    perfline run rcu-gp -p iterations=2 --repeat 3 --warmup 0 --no-monitors --label reboot-6.12 \\
        --target kexec --kernel debian-6.12 --boot reboot || {{ echo "@perfline-test run failed"; systemctl poweroff; }} ;;
*)  echo "@perfline-test grubenv: $(grub-editenv /boot/grub/grubenv list | tr '\\n' ' ')"
    [ -e /boot/grub/custom.cfg ] && echo "@perfline-test custom.cfg: $(cat /boot/grub/custom.cfg)"
    cmp -s /boot/grub/grub.cfg /var/lib/perfline-test-grub.cfg && echo "@perfline-test grub.cfg unchanged"
    echo "@perfline-test done"
    systemctl poweroff ;;
esac
"""


def test_where_kexec_is_refused_boot_reboot_goes_through_grubs_one_shot_entry(
    tmp_path: Path, debian_kernels: dict[str, Kernel], postgres_server: PrivateServer
) -> None:
    """The lab machine boots through the real GRUB (its default entry 6.1). With
    kexec_load_disabled set, `run --target kexec --boot reboot` says kexec is refused,
    writes perfline's entry in custom.cfg, `grub-reboot`s it and reboots; GRUB boots it
    once (clearing `next_entry` in grubenv itself), `perfline resume` measures on 6.12 and
    reboots, and GRUB's default, 6.1, comes back."""
    default, tested = debian_kernels["debian-6.1"], debian_kernels["debian-6.12"]
    url = postgres_server.create_database("kexec_reboot_guest")
    driver = REBOOT_DRIVER.format(default=default.release, mount=TEST_DISK_MOUNT, db=guest_url(url),
                                  python=VENV / "bin" / "python")
    disk = guest_disk(tmp_path, driver, {f"cache/kernels/{k.name}": k.directory for k in (default, tested)})
    text = run_guest(tmp_path, default, tested, disk, grub=True)
    assert "@perfline-test done" in text, f"the guest did not finish; its console ended:\n{text[-6000:]}"

    # GRUB booted 6.1, then its one-shot entry 6.12, then 6.1 again.
    booted = re.findall(r"Command line: BOOT_IMAGE=/boot/vmlinuz-(\S+)", text)
    assert booted == [default.release, tested.release, default.release], booted
    assert ("through GRUB's one-shot entry (kexec is refused here: kexec is disabled until the next boot "
            "(/proc/sys/kernel/kexec_load_disabled is 1") in text, text[-6000:]
    store = Store.open(url)
    [boot] = store.kexec_boots()
    assert boot.how == "reboot"
    fingerprint = returned_run(store, boot, default, tested, "reboot-6.12", "reboot").fingerprint
    # GRUB's `linux` line: the image in /boot, the command line perfline gave the entry.
    assert fingerprint["cmdline"].startswith(f"BOOT_IMAGE=/boot/vmlinuz-{tested.release} ")
    assert f"panic=10 oops=panic perfline.boot={boot.token}" in fingerprint["cmdline"]
    assert [run.label for run in store.list_runs(50)].count("reboot-6.12") == 1
    # Nothing left changed: the one-shot entry used up (GRUB empties next_entry), no
    # saved default, perfline's block gone from custom.cfg, grub.cfg as update-grub wrote it.
    [grubenv] = re.findall(r"@perfline-test grubenv: (.*)", text)
    assert grubenv.split() == ["next_entry="], grubenv
    assert "@perfline-test custom.cfg" not in text and "@perfline-test grub.cfg unchanged" in text


def returned_run(store: Store, boot: KexecBoot, default: Kernel, tested: Kernel, label: str, how: str) -> RunDetail:
    """The boot's one run, of three repetitions, measured on `tested` booted `how` from
    `default`, and the boot back on `default`."""
    assert (boot.state, boot.kernel, boot.release) == ("returned", tested.name, tested.release), boot
    assert boot.error is None and boot.default_release == default.release
    [run_id] = boot.run_ids
    detail = store.get_run(run_id)
    assert detail.info.status == "completed" and detail.info.label == label
    assert detail.fingerprint["kernel_release"] == tested.release and detail.fingerprint["target"] == "kexec"
    assert detail.fingerprint["boot"] == {"how": how, "from": default.release, "kernel": tested.name,
                                          "image sha256": tested.meta.sha256, "watchdog": boot.watchdog}
    assert len({s.repetition for s in detail.samples}) == 3
    return detail


def guest_url(url: str) -> str:
    """The store as the guest reaches it: this host's loopback is 10.0.2.2 there."""
    return url.replace(f"@{HOST}:", "@10.0.2.2:")


def run_guest(tmp: Path, default: Kernel, tested: Kernel, disk: Path, *, firmware: Kernel | None = None,
              append: str = DEFAULT_CMDLINE, hardware: tuple[str, ...] = (), grub: bool = False) -> str:
    """Boot the lab machine on its default kernel until it powers off; its console.
    `firmware`: the kernel QEMU boots at every reset, when not `default` (the image
    holds both kernels either way); `hardware`: more of QEMU's options (a watchdog);
    `grub`: every boot goes through the image's GRUB on its own boot disk instead
    (kexec_machine.grub_disk), which reads grub.cfg and grubenv on the root disk."""
    from test_qemu_target import TEST_CACHE

    image = machine_image(TEST_CACHE, [default, tested])
    if grub:
        # In the last PCI slot, so that the guest's disks keep their names (vda, vdb, then this).
        boot = ["-drive", f"file={grub_disk(image, tmp)},if=none,id=grub,format=raw,readonly=on",
                "-device", "virtio-blk-pci,drive=grub,bootindex=0,addr=0x1f"]
    else:
        booted = firmware or default
        boot = ["-kernel", str(booted.image), "-initrd", str(boot_files(image, booted.release, image.parent)),
                "-append", append]
    console = tmp / "console.log"
    qemu = subprocess.Popen(
        # -cpu max: numpy's wheels need x86-64-v2 instructions (SSE4.2, POPCNT), which
        # TCG's default CPU model lacks (the guest's python died of "invalid opcode").
        ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "2",
         "-drive", f"file={image},if=virtio,format=raw,snapshot=on",
         "-drive", f"file={disk},if=virtio,format=raw",
         "-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0", *hardware, *boot,
         "-nographic", "-nodefaults", "-monitor", "none", "-serial", f"file:{console}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        qemu.wait(GUEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        qemu.kill()
        qemu.wait()
    return console.read_text(errors="replace")


def guest_disk(tmp: Path, driver: str, extra: dict[str, Path]) -> Path:
    """The second disk: the project's sources and helpers, the driver, and `extra`
    (a path on the disk: a directory of this host's to copy there)."""
    staging = tmp / "disk"
    shutil.copytree(CHECKOUT / "src", staging / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(CHECKOUT / "native" / "build", staging / "native" / "build")
    for where, source in extra.items():
        shutil.copytree(source, staging / where)
    assert PYTHON_HOME.is_dir()
    (staging / "driver.sh").write_text(driver)
    disk = tmp / "test.ext4"
    with disk.open("wb") as out:
        out.truncate(512 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(staging), str(disk)], check=True, timeout=300)
    return disk
