"""A kexec job's `watchdog:`: the watchdog that resets a tested kernel that hangs.

Nothing here arms this host's watchdog or re-executes its systemd: the machine is a tree
under tmp_path (its /proc, /sys/class/watchdog, /etc, /run), `systemctl` is a script on
PATH that logs what it was asked and which drop-ins it would have read (the system
edge), and the boot step is the test's own function. Everything else is the code a lab
machine runs; the real reset is the slow guest test (test_kexec_guest.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from perfline.jobs.parse import load_job
from perfline.records.errors import UserError
from perfline.records.job import Case
from perfline.runner import kexec_resume
from perfline.store import Store
from perfline.store.kexec_boots import KexecBoot
from perfline.system.journal import journal_files
from perfline.targets import kexec, local, machine_settings, watchdog
from perfline.targets.kernels import CACHE_ENV, Kernel
from test_boot_entry import opted_in
from test_kexec_target import DEFAULT_CMDLINE, RELEASE_61, machine

SYSTEMCTL = """#!/bin/sh
# systemctl at the edge: what it was asked, and the drop-ins systemd would read then.
echo "$*" >> "{log}"
if [ "$1" = daemon-reexec ]; then
    for f in "{root}"/run/systemd/system.conf.d/*.conf; do [ -f "$f" ] && sed 's/^/  /' "$f" >> "{log}"; done
fi
exit 0
"""


@pytest.fixture
def tested(debian_kernels: dict[str, Kernel], monkeypatch: pytest.MonkeyPatch) -> Kernel:
    """Debian's 6.12, registered where the perfline under test finds it."""
    from test_qemu_target import TEST_CACHE

    monkeypatch.setenv(CACHE_ENV, str(TEST_CACHE))
    return debian_kernels["debian-6.12"]


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine on 6.1 with its own journal directory and systemctl."""
    root = machine(tmp_path / "root", RELEASE_61, "#1 SMP Debian 6.1", DEFAULT_CMDLINE, "boot-0")
    monkeypatch.setenv("PERFLINE_STATE_DIR", str(tmp_path / "state"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(SYSTEMCTL.format(log=tmp_path / "systemctl.log", root=root))
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return root


def hardware(root: Path, stop_on_reboot: str = "0", max_timeout: int = 2046) -> None:
    """An i6300ESB as its driver shows it; the watchdog core's stop_on_reboot as the default kernel booted it."""
    device = root / "sys/class/watchdog/watchdog0"
    device.mkdir(parents=True)
    (device / "identity").write_text("i6300ESB timer\n")
    (device / "max_timeout").write_text(f"{max_timeout}\n")
    driver = root / "sys/bus/pci/drivers/i6300esb"
    driver.mkdir(parents=True)
    (device / "device").mkdir()
    (device / "device/driver").symlink_to(driver)
    parameters = root / "sys/module/watchdog/parameters"
    parameters.mkdir(parents=True)
    (parameters / "stop_on_reboot").write_text(f"{stop_on_reboot}\n")


def softdog(root: Path, at_boot: bool) -> None:
    device = root / "sys/class/watchdog/watchdog0"
    device.mkdir(parents=True)
    (device / "identity").write_text("Software Watchdog\n")
    (device / "max_timeout").write_text("65535\n")
    if at_boot:
        (root / "etc/modules-load.d").mkdir(parents=True)
        (root / "etc/modules-load.d/softdog.conf").write_text("# the tested kernel loads it too\nsoftdog\n")


def installed(root: Path, kernel: Kernel) -> None:
    (root / "boot").mkdir(exist_ok=True)
    (root / "boot" / f"initrd.img-{kernel.release}").write_bytes(b"initramfs")


def case(seconds: int | None = 300) -> Case:
    return Case("rcu-gp", "rcu-gp", {}, {}, 3, 0, (), "kexec", boot_kernel="debian-6.12", watchdog=seconds)


def systemctl_log(tmp_path: Path) -> str:
    log = tmp_path / "systemctl.log"
    return log.read_text() if log.exists() else ""


def test_a_hardware_watchdog_is_armed_across_the_kexec_and_the_tested_kernel_keeps_it(
        tmp_path: Path, tested: Kernel, lab: Path) -> None:
    hardware(lab)
    installed(lab, tested)
    store = Store.open(str(tmp_path / "db"))
    staged: list[str] = []
    drop_in = lab / watchdog.DROP_IN

    def go() -> None:
        # systemd has read the drop-in before the machine goes down.
        assert "KExecWatchdogSec=300s" in drop_in.read_text()
        assert "daemon-reexec\n  # perfline" in systemctl_log(tmp_path)

    boot = kexec_resume.start(store, [case()], opted_in(tmp_path), root=lab,
                              stage=lambda _image, line: staged.append(line), boot=go)
    [line] = staged
    assert "panic=10 oops=panic systemd.watchdog_sec=300 watchdog.open_timeout=300 perfline.boot=" in line
    assert boot.cmdline == line and "systemd.watchdog_device" not in line  # watchdog0: systemd's default
    assert boot.watchdog is not None and boot.watchdog.startswith("i6300ESB timer (i6300esb, /dev/watchdog0), 300 s")
    assert "armed across the kexec" in boot.watchdog and "not covered" not in boot.watchdog
    # The boot under way clears /run: nothing is left in the journal for a later command to undo.
    assert journal_files(tmp_path / "state") == []
    # After the boot, the tested kernel's systemd keeps the watchdog (its command line);
    # the run's fingerprint says which one guarded it.
    measured: list[KexecBoot] = []
    booted = machine(tmp_path / "tested", tested.release, kexec.BootImage.of(tested, lab).banner.split(") ", 1)[1],
                     line, "boot-1")
    done = kexec_resume.resume(store, lambda _c, b: measured.append(b) or [5], root=booted)
    assert done.outcome == "measured"
    assert kexec_resume.boot_fingerprint(local.fingerprint(), measured[0]).boot["watchdog"] == boot.watchdog


def test_with_softdog_only_the_tested_kernels_systemd_guards_and_the_record_says_what_is_not_covered(
        tmp_path: Path, tested: Kernel, lab: Path) -> None:
    installed(lab, tested)
    softdog(lab, at_boot=True)
    staged: list[str] = []
    boot = kexec_resume.start(Store.open(str(tmp_path / "db")), [case(120)], opted_in(tmp_path), root=lab,
                              stage=lambda _image, line: staged.append(line), boot=lambda: None)
    assert "systemd.watchdog_sec=120 perfline.boot=" in staged[0] and "open_timeout" not in staged[0]
    assert boot.watchdog == (
        "Software Watchdog (/dev/watchdog0), 120 s, from the tested kernel's systemd on; not covered: a hang "
        "before the tested kernel's systemd starts (softdog is a timer of the running kernel and does not "
        "survive the kexec; panic=10 still covers panics)")


def test_a_hardware_watchdog_the_core_stops_at_the_kexec_is_not_said_to_be_across_it(
        tmp_path: Path, tested: Kernel, lab: Path) -> None:
    installed(lab, tested)
    hardware(lab, stop_on_reboot="-1")  # the driver's choice: i6300esb asks to be stopped at a reboot
    boot = kexec_resume.start(Store.open(str(tmp_path / "db")), [case()], opted_in(tmp_path), root=lab,
                              stage=lambda _image, _line: None, boot=lambda: None)
    assert boot.watchdog is not None and "watchdog.stop_on_reboot=0" in boot.watchdog
    assert "not covered: a hang before the tested kernel's systemd starts" in boot.watchdog
    # Still armed for the default kernel's own way down.
    assert "KExecWatchdogSec=300s" in (lab / watchdog.DROP_IN).read_text()


@pytest.mark.parametrize(("make", "says"), [
    (lambda root: None, "no watchdog device (/sys/class/watchdog is empty)"),
    (lambda root: softdog(root, at_boot=False), "list it in /etc/modules-load.d/softdog.conf"),
    (lambda root: hardware(root, max_timeout=60), "at most 60 s"),
])
def test_a_watchdog_this_machine_cannot_give_is_one_line_and_changes_nothing(
        make, says: str, tmp_path: Path, tested: Kernel,  # type: ignore[no-untyped-def]
        lab: Path) -> None:
    installed(lab, tested)
    make(lab)
    store = Store.open(str(tmp_path / "db"))
    with pytest.raises(kexec.KexecRefused) as refused:
        kexec_resume.start(store, [case()], opted_in(tmp_path), root=lab,
                           stage=lambda _image, _line: pytest.fail("nothing is staged"),
                           boot=lambda: pytest.fail("nothing boots"))
    assert says in refused.value.message and "\n" not in refused.value.message
    assert store.kexec_boots() == [] and not (lab / "run").exists() and systemctl_log(tmp_path) == ""


def test_watchdog_off_or_unsaid_arms_nothing(tmp_path: Path, tested: Kernel, lab: Path) -> None:
    installed(lab, tested)  # and no watchdog device: none is needed
    store = Store.open(str(tmp_path / "db"))
    staged: list[str] = []
    for seconds, says in ((0, "off (the job's `watchdog: off`"), (None, "none armed by perfline")):
        boot = kexec_resume.start(store, [case(seconds)], opted_in(tmp_path), root=lab,
                                  stage=lambda _image, line: staged.append(line), boot=lambda: None)
        assert str(boot.watchdog).startswith(says)
        store.update_kexec_boot(boot.id, "abandoned")
    assert not any("watchdog" in line for line in staged)
    assert not (lab / "run").exists() and systemctl_log(tmp_path) == ""


def test_a_boot_that_does_not_start_takes_the_watchdog_setting_back(
        tmp_path: Path, tested: Kernel, lab: Path) -> None:
    installed(lab, tested)
    hardware(lab)

    def refused() -> None:
        raise RuntimeError("systemctl kexec: Access denied")

    store = Store.open(str(tmp_path / "db"))
    with pytest.raises(RuntimeError):
        kexec_resume.start(store, [case()], opted_in(tmp_path), root=lab, stage=lambda _image, _line: None,
                           boot=refused)
    (boot,) = store.kexec_boots()
    assert boot.state == "abandoned" and "Access denied" in str(boot.error)
    assert not (lab / watchdog.DROP_IN).exists() and journal_files(tmp_path / "state") == []
    # systemd read its configuration again without the drop-in.
    log = systemctl_log(tmp_path)
    assert log.count("daemon-reexec") == 2 and log.endswith("daemon-reexec\n")


CRASHING = """
import os, signal, sys
from pathlib import Path
from perfline.system.journal import own_journal
from perfline.system.kernel_state import KernelState
from perfline.targets import watchdog

root = Path(sys.argv[1])
armed = watchdog.guard(300, "kexec", root)
watchdog.arm(armed, KernelState(own_journal()), root)
os.kill(os.getpid(), signal.SIGKILL)  # killed between arming and the boot
"""


def test_a_perfline_killed_after_arming_is_undone_by_the_next_command(tmp_path: Path, lab: Path) -> None:
    hardware(lab)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, "-c", CRASHING, str(lab)], env=env, timeout=120, check=False)
    assert killed.returncode == -signal.SIGKILL
    assert (lab / watchdog.DROP_IN).is_file() and len(journal_files(tmp_path / "state")) == 1
    after = subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "kernels", "list"],
                           capture_output=True, text=True, env=env, timeout=120, check=False)
    assert after.returncode == 0, after.stderr
    assert f"removed systemd's drop-in {lab / watchdog.DROP_IN} and re-executed systemd" in after.stderr
    assert not (lab / watchdog.DROP_IN).exists() and journal_files(tmp_path / "state") == []
    assert systemctl_log(tmp_path).endswith("daemon-reexec\n")


def test_boot_reboot_arms_the_reboot_and_says_the_firmware_may_stop_it(lab: Path) -> None:
    hardware(lab)
    armed = watchdog.guard(600, "reboot", lab)
    assert "[Manager]\nRebootWatchdogSec=600s\n" in armed.drop_in() and not armed.across
    assert "the firmware's reset may stop it" in armed.describe()


@pytest.mark.parametrize(("text", "says"), [
    ("target: kexec\nkernel: debian-6.12\nwatchdog: 300\n", None),
    ("target: kexec\nkernel: debian-6.12\nwatchdog: off\n", None),
    ("target: kexec\nkernel: debian-6.12\nwatchdog: 10\n", "job.yaml:4: watchdog must be seconds, at least 30"),
    ("target: kexec\nkernel: debian-6.12\nwatchdog: soon\n", "job.yaml:4: watchdog must be seconds"),
    ("target: kexec\nkernel: debian-6.12\nwatchdog: true\n", "job.yaml:4: watchdog must be seconds"),
    ("watchdog: 300\n", "job.yaml:2: watchdog applies only to `target: kexec`"),
])
def test_the_watchdog_key_of_a_job_file(text: str, says: str | None, tmp_path: Path,
                                        tested: Kernel) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: rcu-gp\n" + text)
    if says is None:
        from perfline.jobs import expand

        [expanded] = expand(load_job(job))
        assert expanded.watchdog == (300 if "300" in text else 0)
        return
    with pytest.raises(UserError, match=says.replace("`", ".")):
        load_job(job)


def test_a_bad_watchdog_is_one_error_line_and_exit_2(tmp_path: Path, tested: Kernel,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from test_qemu_target import TEST_CACHE

    monkeypatch.setenv(machine_settings.SETTINGS_ENV, str(tmp_path / "machine.yaml"))
    machine_settings.allow_kexec(machine_settings.settings_path())
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: rcu-gp\ntarget: kexec\nkernel: debian-6.12\nwatchdog: 5min\n")
    proc = subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "run", str(job)],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, CACHE_ENV: str(TEST_CACHE)})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {job}:4: watchdog must be seconds") and "'5min'" in proc.stderr
    assert not (tmp_path / "db").exists()


def test_a_boot_the_watchdog_reset_is_boot_failed_and_says_so(tmp_path: Path, lab: Path) -> None:
    from test_kexec_target import plan

    store = Store.open(str(tmp_path / "db"))
    boot = plan(store, lab, "tok9", [case()])
    # The default kernel again, after a reset; the i6300ESB's driver read that it fired.
    again = machine(tmp_path / "again", RELEASE_61, "#1 SMP Debian 6.1", DEFAULT_CMDLINE, "boot-1")
    hardware(again)
    (again / "sys/class/watchdog/watchdog0/bootstatus").write_text("32\n")
    failed = kexec_resume.resume(store, lambda _c, _b: pytest.fail("nothing is measured"), root=again)
    assert failed.outcome == "boot-failed"
    assert str(store.kexec_boot(boot.id).error).endswith(
        "; the watchdog reset the machine (i6300ESB timer (/dev/watchdog0) says so in its bootstatus)")
    # A reset by anything else (panic=10) leaves bootstatus 0: nothing is said.
    boot = plan(store, lab, "tok10", [case()])
    (again / "sys/class/watchdog/watchdog0/bootstatus").write_text("0\n")
    machine(again, RELEASE_61, "#1 SMP Debian 6.1", DEFAULT_CMDLINE, "boot-2")
    kexec_resume.resume(store, lambda _c, _b: [], root=again)
    assert "watchdog" not in str(store.kexec_boot(boot.id).error)
