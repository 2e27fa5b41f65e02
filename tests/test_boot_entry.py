"""`boot: reboot`: where kexec is refused, the machine boots the kernel under test through
GRUB's one-shot entry, and `perfline resume` goes on after it as after a kexec.

Nothing here reboots anything: the machine is a tree under tmp_path (its /proc, /sys,
/etc and /boot), the boot step is the test's own function, and the GRUB tools the
entry needs (grub-probe, grub-mkrelpath, grub-reboot, grub-editenv) are small scripts
on PATH that do to the tree's /boot/grub what GRUB's do to a machine's (the system
edge: this host has no GRUB). Everything else is the code a lab machine runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfline.records.job import Case
from perfline.runner import kexec_resume
from perfline.store import Store
from perfline.store.kexec_boots import KexecBoot
from perfline.targets import boot_entry, kexec, local, machine_settings
from perfline.targets.kernels import CACHE_ENV, Kernel
from test_kexec_target import DEFAULT_CMDLINE, RELEASE_61, machine

ADMINS = "menuentry 'rescue' {\n\tlinux /vmlinuz-rescue\n}\n"
GRUB_CFG = ("if [ \"${next_entry}\" ] ; then\n   set default=\"${next_entry}\"\n   set next_entry=\n"
            "   save_env next_entry\nfi\n### BEGIN /etc/grub.d/41_custom ###\n"
            "if [ -f  ${config_directory}/custom.cfg ]; then\n  source ${config_directory}/custom.cfg\nfi\n")
# What GRUB's tools do to a machine's /boot, done to the test's tree.
TOOLS = {
    "grub-probe": """case "$1" in --target=fs_uuid) echo 5a1e-0b0f;; --target=fs) echo ext2;;
                     --target=partmap) echo gpt;; *) exit 1;; esac""",
    "grub-mkrelpath": 'echo "/$(basename "$1")"',
    "grub-reboot": """env="${1#--boot-directory=}/grub/grubenv"; touch "$env"
                      grep -v "^next_entry=" "$env" > "$env.new" || true
                      printf "next_entry=%s\\n" "$2" >> "$env.new"; mv "$env.new" "$env\"""",
    "grub-editenv": """case "$2" in list) cat "$1";;
                       unset) { grep -v "^$3=" "$1" || true; } > "$1.new"; mv "$1.new" "$1";;
                       *) exit 1;; esac""",
}


@pytest.fixture
def grub_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in TOOLS.items():
        (bin_dir / name).write_text(f"#!/bin/sh\nset -e\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def lab(tmp_path: Path, kernel: Kernel, *, lockdown: bool = True) -> Path:
    """A machine on Debian's 6.1, locked down (Secure Boot), with GRUB and `kernel` installed."""
    root = machine(tmp_path / "root", RELEASE_61, "#1 SMP Debian 6.1", DEFAULT_CMDLINE, "boot-0")
    if lockdown:
        (root / "sys/kernel/security").mkdir(parents=True)
        (root / "sys/kernel/security/lockdown").write_text("none [integrity] confidentiality\n")
    grub = root / boot_entry.GRUB_DIR
    grub.mkdir(parents=True)
    (grub / "grub.cfg").write_text(GRUB_CFG)
    (grub / "custom.cfg").write_text(ADMINS)
    shutil.copyfile(kernel.image, root / "boot" / f"vmlinuz-{kernel.release}")
    (root / "boot" / f"initrd.img-{kernel.release}").write_bytes(b"initramfs")
    return root


def opted_in(tmp_path: Path) -> machine_settings.MachineSettings:
    settings = machine_settings.allow_kexec(tmp_path / "machine.yaml")
    unit = tmp_path / kexec.RESUME_UNIT
    unit.write_text("[Unit]\n")
    return machine_settings.set_resume_unit(unit, settings.path)


def case(boot: str = "reboot") -> Case:
    return Case("rcu-gp", "rcu-gp", {}, {}, 3, 0, (), "kexec", boot_kernel="debian-6.12", boot=boot)


def kexec_must_not_run(_image: kexec.BootImage, _cmdline: str) -> None:
    raise AssertionError("kexec is refused here: nothing may be staged with it")


@pytest.fixture
def kernels(debian_kernels: dict[str, Kernel], monkeypatch: pytest.MonkeyPatch) -> dict[str, Kernel]:
    from test_qemu_target import TEST_CACHE

    monkeypatch.setenv(CACHE_ENV, str(TEST_CACHE))
    return debian_kernels


def test_a_locked_down_machine_boots_the_kernel_once_through_grub_and_resume_goes_on(
        tmp_path: Path, kernels: dict[str, Kernel], grub_tools: Path) -> None:
    tested = kernels["debian-6.12"]
    root = lab(tmp_path, tested)
    store = Store.open(str(tmp_path / "db"))
    rebooted: list[str] = []
    boot = kexec_resume.start(store, [case()], opted_in(tmp_path), root=root, stage=kexec_must_not_run,
                              boot=lambda: pytest.fail("not by kexec"),
                              reboot=kexec_resume.BootMethod("reboot", kexec_resume.one_shot_entry(root).stage,
                                                             lambda: boot_entry.remove(root),
                                                             lambda: rebooted.append("reboot")))
    assert rebooted == ["reboot"] and boot.how == "reboot" and boot.state == "pending"
    custom = (root / "boot/grub/custom.cfg").read_text()
    # The administrator's entries stay; perfline's is its own block, booted once by id.
    assert custom.startswith(ADMINS) and f"--id {boot_entry.ENTRY_ID}" in custom
    assert "search --no-floppy --fs-uuid --set=root 5a1e-0b0f" in custom
    assert (f"linux /vmlinuz-{tested.release} root=/dev/vda ro console=ttyS0 quiet panic=10 oops=panic "
            f"perfline.boot={boot.token}") in custom
    assert f"initrd /initrd.img-{tested.release}" in custom
    assert (root / "boot/grub/grubenv").read_text() == f"next_entry={boot_entry.ENTRY_ID}\n"
    # GRUB booted the entry (and cleared next_entry, as it does); the tested kernel runs.
    (root / "boot/grub/grubenv").write_text("next_entry=\n")
    booted = machine(tmp_path / "tested", tested.release, kexec.BootImage.of(tested, root).banner.split(") ", 1)[1],
                     f"root=/dev/vda perfline.boot={boot.token}", "boot-1")
    for sub in ("boot", "etc"):
        shutil.rmtree(booted / sub, ignore_errors=True)
        shutil.copytree(root / sub, booted / sub)
    measured: list[KexecBoot] = []

    def measure(_cases: list[Case], measuring: KexecBoot) -> list[int]:
        measured.append(measuring)
        return [7]

    done = kexec_resume.resume(store, measure, root=booted)
    assert done.outcome == "measured" and done.reboot and [b.id for b in measured] == [boot.id]
    assert kexec_resume.boot_fingerprint(local.fingerprint(), measured[0]).boot["how"] == "reboot"
    # The entry is gone once used: nothing of perfline's is left in the boot loader.
    assert (booted / "boot/grub/custom.cfg").read_text() == ADMINS


def test_kexec_refused_without_boot_reboot_says_which_and_changes_nothing(
        tmp_path: Path, kernels: dict[str, Kernel], grub_tools: Path) -> None:
    root = lab(tmp_path, kernels["debian-6.12"])
    store = Store.open(str(tmp_path / "db"))
    with pytest.raises(kexec.KexecRefused) as refused:
        kexec_resume.start(store, [case("kexec")], opted_in(tmp_path), root=root, stage=kexec_must_not_run,
                           boot=lambda: pytest.fail("nothing boots"))
    message = refused.value.message
    assert "locked down" in message and "`boot: reboot`" in message and "\n" not in message
    assert store.kexec_boots() == [] and (root / "boot/grub/custom.cfg").read_text() == ADMINS
    assert not (root / "boot/grub/grubenv").exists()
    # kexec_load_disabled is said the same way.
    (root / "sys/kernel/security/lockdown").write_text("[none] integrity confidentiality\n")
    (root / "proc/sys/kernel/kexec_load_disabled").write_text("1\n")
    with pytest.raises(kexec.KexecRefused, match=r"kexec_load_disabled is 1.*`boot: reboot`"):
        kexec_resume.start(store, [case("kexec")], opted_in(tmp_path), root=root, stage=kexec_must_not_run,
                           boot=lambda: pytest.fail("nothing boots"))


@pytest.mark.parametrize(("damage", "says"), [
    (lambda root: (root / "boot/grub/grub.cfg").unlink(), "no GRUB configuration"),
    (lambda root: (root / "boot/grub/grub.cfg").write_text("source custom.cfg\n"), "no one-shot entry"),
    (lambda root: (root / "boot/grub/grub.cfg").write_text("next_entry\n"), "does not source custom.cfg"),
    (lambda root: next((root / "boot").glob("vmlinuz-*")).write_bytes(b"other"), "not the registered image"),
    (lambda root: next((root / "boot").glob("vmlinuz-*")).unlink(), "GRUB boots what /boot holds"),
])
def test_boot_reboot_where_grub_cannot_is_one_line(damage, says: str, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                   kernels: dict[str, Kernel], grub_tools: Path) -> None:
    root = lab(tmp_path, kernels["debian-6.12"])
    damage(root)
    store = Store.open(str(tmp_path / "db"))
    with pytest.raises(kexec.KexecRefused) as refused:
        kexec_resume.start(store, [case()], opted_in(tmp_path), root=root, stage=kexec_must_not_run,
                           boot=lambda: pytest.fail("nothing boots"))
    assert says in refused.value.message and "locked down" in refused.value.message
    assert store.kexec_boots() == [] and (root / "boot/grub/custom.cfg").read_text() == ADMINS


def test_a_reboot_that_does_not_start_leaves_grub_as_it_was(tmp_path: Path, kernels: dict[str, Kernel],
                                                            grub_tools: Path) -> None:
    root = lab(tmp_path, kernels["debian-6.12"])
    (root / "boot/grub/grubenv").write_text("saved_entry=0\n")
    store = Store.open(str(tmp_path / "db"))

    def refused() -> None:
        raise RuntimeError("systemctl reboot: Access denied")

    one_shot = kexec_resume.one_shot_entry(root)
    with pytest.raises(RuntimeError):
        kexec_resume.start(store, [case()], opted_in(tmp_path), root=root, stage=kexec_must_not_run,
                           boot=lambda: pytest.fail("not by kexec"),
                           reboot=kexec_resume.BootMethod("reboot", one_shot.stage, one_shot.unstage, refused))
    (boot,) = store.kexec_boots()
    assert boot.state == "abandoned" and "Access denied" in str(boot.error)
    assert (root / "boot/grub/custom.cfg").read_text() == ADMINS
    assert (root / "boot/grub/grubenv").read_text() == "saved_entry=0\n"


def test_without_grub_tools_the_entry_is_refused_in_one_line(tmp_path: Path, kernels: dict[str, Kernel],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = lab(tmp_path, kernels["debian-6.12"])
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    store = Store.open(str(tmp_path / "db"))
    with pytest.raises(kexec.KexecRefused, match="grub-probe"):
        kexec_resume.start(store, [case()], opted_in(tmp_path), root=root, stage=kexec_must_not_run,
                           boot=lambda: pytest.fail("nothing boots"))
    assert store.kexec_boots() == [] and (root / "boot/grub/custom.cfg").read_text() == ADMINS


@pytest.mark.parametrize(("args", "job", "says"), [
    (["--boot", "sometimes"], None, "--boot: 'sometimes': give kexec or reboot"),
    (["--boot", "reboot", "--target", "local"], None, "--boot: 'reboot': give kexec or reboot, with --target kexec"),
    ([], "benchmark: rcu-gp\ntarget: kexec\nkernel: debian-6.12\nboot: sometimes\n", "job.yaml:4: unknown boot"),
    ([], "benchmark: rcu-gp\nboot: reboot\n", "job.yaml:2: boot applies only to `target: kexec`"),
    (["--watchdog", "300s"], None, "--watchdog: watchdog must be seconds, at least 30"),
    (["--watchdog", "10"], None, "--watchdog: watchdog must be seconds, at least 30"),
    (["--watchdog", "300", "--target", "local"], None, "--watchdog: applies only to --target kexec"),
])
def test_bad_boot_values_are_one_line(args: list[str], job: str | None, says: str, tmp_path: Path,
                                      kernels: dict[str, Kernel], monkeypatch: pytest.MonkeyPatch) -> None:
    from test_qemu_target import TEST_CACHE

    # This test's own settings, opted in (the session's stay as they are for the other tests).
    monkeypatch.setenv(machine_settings.SETTINGS_ENV, str(tmp_path / "machine.yaml"))
    machine_settings.allow_kexec(machine_settings.settings_path())
    what = ["rcu-gp", "--target", "kexec", "--kernel", "debian-6.12"] if job is None else [str(tmp_path / "job.yaml")]
    if job is not None:
        (tmp_path / "job.yaml").write_text(job)
    if "--target" in args:
        what = ["rcu-gp"]
    proc = subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "run", *what, *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, CACHE_ENV: str(TEST_CACHE)})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert says in proc.stderr
    assert not (tmp_path / "db").exists()


def test_the_watchdog_option_lays_over_the_job_files(tmp_path: Path, kernels: dict[str, Kernel]) -> None:
    """`run`/`ab --watchdog SECONDS|off`, as the job file's `watchdog:` says it, and over it."""
    from perfline.jobs.command_line import CommandLineJob, Target, build_ab, build_job

    job_file = tmp_path / "job.yaml"
    job_file.write_text("benchmark: rcu-gp\ntarget: kexec\nkernel: debian-6.12\nwatchdog: 120\n")
    kexec_target = Target("kexec", "debian-6.12")
    assert build_job(CommandLineJob(str(job_file)))[0].watchdog == 120
    assert build_job(CommandLineJob(str(job_file), target=Target(watchdog="300")))[0].watchdog == 300
    assert build_job(CommandLineJob(str(job_file), target=Target(watchdog="off")))[0].watchdog == 0
    assert build_job(CommandLineJob("rcu-gp", target=kexec_target))[0].watchdog is None
    sides = build_ab(CommandLineJob("rcu-gp", target=Target("kexec", "debian-6.12", watchdog="90")),
                     ["kernel:debian-6.1"], [], 4)
    assert [side.watchdog for side in sides] == [90, 90]
