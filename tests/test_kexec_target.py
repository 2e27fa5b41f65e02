"""Target kexec on this host: only the checks, the opt-in and the store's side of a boot.

Nothing here can boot or reboot this machine: the machine settings live in a temporary
directory (conftest points $PERFLINE_MACHINE_SETTINGS there for every test), the boot
step is the test's own function (resume only says when to reboot), and the kernels
"running" are trees of /proc files under tmp_path. The real boots are in the slow test
(test_kexec_guest.py), inside a QEMU guest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfline.jobs.parse import load_job
from perfline.records.errors import UserError
from perfline.records.job import Case, case_from_json, case_to_json
from perfline.runner import kexec_resume
from perfline.store import Store
from perfline.store.kexec_boots import KexecBoot, PlannedBoot
from perfline.targets import kexec, machine_settings
from perfline.targets.kernels import CACHE_ENV

RELEASE_61, RELEASE_612 = "6.1.0-56-cloud-amd64", "6.12.117+deb12-cloud-amd64"
VERSION_612 = "#1 SMP PREEMPT_DYNAMIC Debian 6.12.117-1~deb12u1 (2026-11-14)"
BANNER_612 = f"{RELEASE_612} (debian-kernel@lists.debian.org) {VERSION_612}"
DEFAULT_CMDLINE = "BOOT_IMAGE=/boot/vmlinuz-6.1 root=/dev/vda ro console=ttyS0 panic=30 quiet"


def perfline(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp / "db"), *args], capture_output=True,
                          text=True, timeout=120, check=False, env={**os.environ, CACHE_ENV: str(tmp / "cache")})


def machine(root: Path, release: str, version: str, cmdline: str, boot_id: str) -> Path:
    """A tree of the files the checks read, as a machine running `release` shows them."""
    for path, text in {"proc/sys/kernel/osrelease": release, "proc/sys/kernel/version": version,
                       "proc/cmdline": cmdline, "proc/sys/kernel/random/boot_id": boot_id,
                       "etc/machine-id": "0123456789abcdef0123456789abcdef"}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text + "\n")
    return root


def test_the_settings_of_every_test_are_not_this_machines() -> None:
    # The guard itself: no test can write /etc/perfline/machine.yaml.
    assert machine_settings.settings_path() != machine_settings.DEFAULT_PATH
    assert Path(os.environ[machine_settings.SETTINGS_ENV]).parent != Path("/etc/perfline")


def test_without_the_opt_in_target_kexec_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    proc = perfline(tmp_path, "run", "rcu-gp", "--target", "kexec", "--kernel", "debian-6.12")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
    assert "perfline kernels allow-kexec" in proc.stderr and str(machine_settings.settings_path()) in proc.stderr
    assert not (tmp_path / "db").exists() and not machine_settings.settings_path().exists()


def test_without_the_resume_unit_target_kexec_is_one_line_and_opens_no_store(
        tmp_path: Path, debian_kernels: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    from test_qemu_target import TEST_CACHE

    monkeypatch.setenv(machine_settings.SETTINGS_ENV, str(tmp_path / "machine.yaml"))
    machine_settings.allow_kexec()
    proc = subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "run", "rcu-gp",
                           "--target", "kexec", "--kernel", "debian-6.12"], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, CACHE_ENV: str(TEST_CACHE)})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
    assert "no resume unit: run `perfline kernels install-resume`" in proc.stderr
    assert not (tmp_path / "db").exists()


def test_a_job_file_with_target_kexec_is_refused_the_same_way(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: rcu-gp\ntarget: kexec\nkernel: debian-6.12\n")
    proc = perfline(tmp_path, "run", str(job))
    # The kernel is checked first here (the file is parsed), and it is not registered.
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "debian-6.12" in proc.stderr
    assert not (tmp_path / "db").exists()


def test_opt_in_resume_unit_then_kexec_refused_in_one_line(tmp_path: Path, debian_kernels: dict[str, object],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from test_qemu_target import TEST_CACHE

    monkeypatch.setenv(machine_settings.SETTINGS_ENV, str(tmp_path / "machine.yaml"))
    allowed = perfline(tmp_path, "kernels", "allow-kexec")
    assert allowed.returncode == 0, allowed.stderr
    settings = machine_settings.load()
    assert settings.kexec_allowed and settings.resume_unit is None
    with pytest.raises(kexec.KexecRefused, match=r"no resume unit.*perfline kernels install-resume"):
        kexec.require_resume_unit(settings)
    installed = perfline(tmp_path, "kernels", "install-resume", "--unit-dir", str(tmp_path / "units"))
    assert installed.returncode == 0, installed.stderr
    unit = (tmp_path / "units" / kexec.RESUME_UNIT).read_text()
    assert f"{sys.executable} -m perfline --db sqlite:///{tmp_path / 'db'} resume" in unit
    assert f"Environment={machine_settings.SETTINGS_ENV}={machine_settings.settings_path()}" in unit
    wants = tmp_path / "units/multi-user.target.wants" / kexec.RESUME_UNIT
    assert wants.resolve() == tmp_path / "units" / kexec.RESUME_UNIT
    assert machine_settings.load().resume_unit == tmp_path / "units" / kexec.RESUME_UNIT
    # This host has neither kexec-tools nor Debian's 6.12 modules: refused in one line,
    # and no boot is left in the store.
    refused = subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "run", "rcu-gp",
                              "--target", "kexec", "--kernel", "debian-6.12"], capture_output=True, text=True,
                             timeout=120, check=False, env={**os.environ, CACHE_ENV: str(TEST_CACHE)})
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("error: ")
    assert Store.open(str(tmp_path / "db")).kexec_boots() == []


@pytest.mark.parametrize(("text", "line", "says"), [
    ("kexec: yes\n", 1, "write `kexec: allowed`"),
    ("# admin\nkexec: [allowed\n", 3, "not valid YAML"),
    ("- kexec\n", 1, "expected a mapping"),
    ("kexec: allowed\nresume_unit: 3\n", 2, "resume_unit"),
])
def test_bad_machine_settings_name_their_file_and_line(text: str, line: int, says: str, tmp_path: Path) -> None:
    path = tmp_path / "machine.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        machine_settings.load(path)
    assert caught.value.path == str(path) and caught.value.line == line and says in caught.value.message


def test_job_files_name_their_kexec_kernel(tmp_path: Path, debian_kernels: dict[str, object],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from test_qemu_target import TEST_CACHE

    monkeypatch.setenv(CACHE_ENV, str(TEST_CACHE))
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: rcu-gp\ntarget: kexec\nkernel: debian-6.12\ncmdline: [mitigations=off, '']\n"
                   "tunables:\n  sysctl:\n    kernel.sched_autogroup_enabled: 0\n")
    spec = load_job(job)
    assert spec.target == "kexec" and spec.boot_kernel == "debian-6.12" and spec.vm is None
    from perfline.jobs import expand

    cases = expand(spec)
    assert [c.cmdline for c in cases] == ["mitigations=off", ""]
    assert all(case_from_json(json.loads(json.dumps(case_to_json(c)))) == c for c in cases)
    job.write_text("benchmark: rcu-gp\ntarget: kexec\nkernel: debian-6.12\nvm_cpus: 2\n")
    with pytest.raises(UserError, match=r"job.yaml:4: vm_cpus applies only to `target: qemu`"):
        load_job(job)
    job.write_text("benchmark: rcu-gp\ntarget: kexec\n")
    with pytest.raises(UserError, match="target kexec needs a kernel"):
        load_job(job)


def test_the_tested_kernel_boots_with_the_defaults_line_panic_and_the_token() -> None:
    line = kexec.boot_cmdline(DEFAULT_CMDLINE + " initrd=/x perfline.boot=old oops=continue", "mitigations=off",
                              "abc123")
    assert line == ("root=/dev/vda ro console=ttyS0 quiet panic=10 oops=panic perfline.boot=abc123 "
                    "mitigations=off")
    # The job's own parameters come last, so they win over perfline's.
    assert kexec.boot_cmdline("root=/dev/sda", "oops=continue", "t").endswith("oops=panic perfline.boot=t oops=continue")


def test_the_running_kernel_is_checked_by_token_release_and_build(tmp_path: Path) -> None:
    image = kexec.BootImage("debian-6.12", Path("vmlinuz"), None, RELEASE_612, BANNER_612, "0" * 64)
    right = kexec.RunningKernel.read(machine(tmp_path / "a", RELEASE_612, VERSION_612,
                                             "root=/dev/vda perfline.boot=t1", "b1"))
    assert right.token() == "t1" and image.mismatch(right, "t1") is None
    assert "perfline.boot=t2 is not on its command line" in str(image.mismatch(right, "t2"))
    rebuilt = kexec.RunningKernel.read(machine(tmp_path / "b", RELEASE_612, "#2 SMP (other)",
                                               "perfline.boot=t1", "b1"))
    assert "not as the image" in str(image.mismatch(rebuilt, "t1"))
    other = kexec.RunningKernel.read(machine(tmp_path / "c", RELEASE_61, "#1 SMP", "perfline.boot=t1", "b1"))
    assert f"runs {RELEASE_61}, not {RELEASE_612}" in str(image.mismatch(other, "t1"))


def test_refusals_by_the_running_kernel(tmp_path: Path) -> None:
    root = machine(tmp_path, RELEASE_61, "#1", DEFAULT_CMDLINE, "b0")
    assert kexec.refusal(root) is None
    (root / "proc/sys/kernel/kexec_load_disabled").write_text("1\n")
    assert "kexec_load_disabled is 1" in str(kexec.refusal(root))
    (root / "proc/sys/kernel/kexec_load_disabled").write_text("0\n")
    (root / "sys/kernel/security").mkdir(parents=True)
    (root / "sys/kernel/security/lockdown").write_text("none [integrity] confidentiality\n")
    assert "locked down" in str(kexec.refusal(root)) and "Secure Boot" in str(kexec.refusal(root))


def plan(store: Store, root: Path, token: str, cases: list[Case], how: str = "kexec") -> KexecBoot:
    running = kexec.RunningKernel.read(root)
    return store.plan_kexec_boot(PlannedBoot(
        machine_id="0123456789abcdef0123456789abcdef", hostname="lab1", kernel="debian-6.12", release=RELEASE_612,
        banner=BANNER_612, sha256="0" * 64, cmdline=f"root=/dev/vda panic=10 perfline.boot={token}", token=token,
        default_release=running.release, cases=[case_to_json(c) for c in cases], label="try", kernel_commit=None,
        boot_id_before=running.boot_id, fleet_attempt=None, how=how, series_id=None, series_step=None,
        watchdog=None))


def test_resume_measures_once_on_the_right_kernel_and_comes_back(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "db"))
    case = Case("rcu-gp", "rcu-gp", {"iterations": 2}, {}, 3, 0, (), "kexec", boot_kernel="debian-6.12")
    default = machine(tmp_path / "default", RELEASE_61, "#1 SMP Debian 6.1", DEFAULT_CMDLINE, "boot-0")
    boot = plan(store, default, "tok1", [case])
    measured: list[list[Case]] = []

    def measure(cases: list[Case], _boot: KexecBoot) -> list[int]:
        measured.append(cases)
        return [41]

    # Resume in the boot that planned it (the unit at a later start, say): nothing yet.
    early = kexec_resume.resume(store, measure, root=default)
    assert (early.outcome, early.reboot) == ("waiting", False)
    tested = machine(tmp_path / "tested", RELEASE_612, VERSION_612, "root=/dev/vda perfline.boot=tok1", "boot-1")
    done = kexec_resume.resume(store, measure, root=tested)
    assert done.outcome == "measured" and done.reboot and measured == [[case]]
    assert store.kexec_boot(boot.id).state == "measured" and store.kexec_boot(boot.id).run_ids == [41]
    # The unit again in the same boot measures nothing twice, and asks for the reboot again.
    again = kexec_resume.resume(store, measure, root=tested)
    assert (again.outcome, again.reboot) == ("waiting", True) and len(measured) == 1
    back = machine(tmp_path / "back", RELEASE_61, "#1 SMP Debian 6.1", DEFAULT_CMDLINE, "boot-2")
    returned = kexec_resume.resume(store, measure, root=back)
    assert returned.outcome == "returned" and not returned.reboot and store.kexec_boot(boot.id).error is None
    assert kexec_resume.resume(store, measure, root=back).outcome == "nothing"


def test_a_kernel_that_did_not_boot_is_boot_failed_with_its_console(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "db"))
    case = Case("rcu-gp", "rcu-gp", {}, {}, 3, 0, (), "kexec", boot_kernel="debian-6.12")
    default = machine(tmp_path / "default", RELEASE_61, "#1 SMP Debian 6.1", DEFAULT_CMDLINE, "boot-0")
    boot = plan(store, default, "tok2", [case])
    # panic=10 reset the machine; the firmware booted its default, and ramoops kept the panic.
    reset = machine(tmp_path / "reset", RELEASE_61, "#1 SMP Debian 6.1", DEFAULT_CMDLINE, "boot-1")
    pstore = reset / "var/lib/systemd/pstore/1764194400"
    pstore.mkdir(parents=True)
    (pstore / "dmesg-ramoops-0").write_text("Panic#1 Part1\n<0>[    2.1] Kernel panic - not syncing: "
                                            "Attempted to kill init! exitcode=0x00000100\n")

    def measure(_cases: list[Case], _boot: KexecBoot) -> list[int]:
        raise AssertionError("nothing is measured on the wrong kernel")

    failed = kexec_resume.resume(store, measure, root=reset)
    stored = store.kexec_boot(boot.id)
    assert failed.outcome == "boot-failed" and not failed.reboot
    assert stored.state == "boot-failed" and stored.boot_id_after == "boot-1"
    assert "Attempted to kill init" in str(stored.console) and "dmesg-ramoops-0" in str(stored.console)
    assert f"runs {RELEASE_61}, not booted by perfline" in str(stored.error)
    # Nothing is left open: the machine takes the next job.
    assert store.open_kexec_boot(stored.machine_id) is None


def test_a_machine_that_went_down_while_measuring_is_boot_failed(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "db"))
    case = Case("rcu-gp", "rcu-gp", {}, {}, 3, 0, (), "kexec", boot_kernel="debian-6.12")
    default = machine(tmp_path / "default", RELEASE_61, "#1", DEFAULT_CMDLINE, "boot-0")
    boot = plan(store, default, "tok3", [case])
    store.update_kexec_boot(boot.id, "booted", boot_id_after="boot-1")
    again = machine(tmp_path / "again", RELEASE_61, "#1", DEFAULT_CMDLINE, "boot-2")
    failed = kexec_resume.resume(store, lambda _c, _b: [], root=again)
    assert failed.outcome == "boot-failed" and "went down while measuring" in str(store.kexec_boot(boot.id).error)
    assert "no console lines were kept" in str(store.kexec_boot(boot.id).error)


def test_start_checks_everything_before_anything_changes(tmp_path: Path, debian_kernels: dict[str, object],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from test_qemu_target import TEST_CACHE

    monkeypatch.setenv(CACHE_ENV, str(TEST_CACHE))
    settings = machine_settings.allow_kexec(tmp_path / "machine.yaml")
    unit = tmp_path / kexec.RESUME_UNIT
    unit.write_text("[Unit]\n")
    settings = machine_settings.set_resume_unit(unit, settings.path)
    store = Store.open(str(tmp_path / "db"))
    root = machine(tmp_path / "root", RELEASE_61, "#1", DEFAULT_CMDLINE, "boot-0")
    case = Case("rcu-gp", "rcu-gp", {}, {}, 3, 0, (), "kexec", boot_kernel="debian-6.12")
    booted: list[str] = []
    # Two command lines would be two boots.
    other = Case("rcu-gp", "rcu-gp", {}, {"cmdline": {"cmdline": "nosmt"}}, 3, 0, (), "kexec",
                 boot_kernel="debian-6.12")
    with pytest.raises(kexec.KexecRefused, match="split it"):
        kexec_resume.start(store, [case, other], settings, root=root, boot=lambda: booted.append("boot"))
    with pytest.raises(kexec.KexecRefused, match="no modules installed"):
        kexec_resume.start(store, [case], settings, root=root, boot=lambda: booted.append("boot"))
    assert booted == [] and store.kexec_boots() == []
    # An open boot of this machine blocks another.
    plan(store, root, "tok4", [case])
    with pytest.raises(kexec.KexecRefused, match="still pending"):
        kexec_resume.start(store, [case], settings, root=root, boot=lambda: booted.append("boot"))
    assert booted == [] and len(store.kexec_boots()) == 1


def test_a_kexec_case_runs_only_in_the_boot_it_asked_for(tmp_path: Path) -> None:
    # ab, bisect, track and the fleet reach the runner without booting anything: refused
    # before anything is set up or stored.
    from perfline.runner import RunContext, execute

    store = Store.open(str(tmp_path / "db"))
    case = Case("rcu-gp", "rcu-gp", {}, {}, 3, 0, (), "kexec", boot_kernel="debian-6.12")
    with pytest.raises(UserError, match="runs only on the kernel it boots"):
        execute(case, RunContext(store=store, fingerprint=lambda: pytest.fail("nothing is read"),
                                 observer=None))  # type: ignore[arg-type]
    assert store.list_runs() == []
