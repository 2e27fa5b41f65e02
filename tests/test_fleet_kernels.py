"""Kernel trackers on the fleet, on this host: a real tracker process and PostgreSQL, the
worker's own loop and `perfline resume`'s own code in this process, up to the kexec call.

Each tested commit is a kernel job: the worker takes the commit's kernel from the fleet's
shared image directory, registers it, checks and stages it, writes the boot with the
job's attempt, and boots. The boot is the true system edge: the steps that would stage
and execute the kernel, and the /proc and /etc the worker and the resume read, are the
test's (a tree under tmp_path, as in test_kexec_target.py), so nothing here can boot this
host. The test then plays the machine: the tested kernel comes up (the tree shows its
release, build and the boot's command line) and `resume_here`, all that `perfline resume`
does before its reboot, measures and ends the job; or, for the commit whose kernel
"panics", the machine comes back on its default kernel with the panic in pstore. The real
boots are in the slow guest test (test_kexec_guest.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfline.builds import kernel
from perfline.cli.kexec import resume_here
from perfline.fleet import kernel_jobs
from perfline.fleet.machine import describe
from perfline.fleet.queue import FleetQueue
from perfline.fleet.stalled import take_back_stalled
from perfline.fleet.status import fleet_status
from perfline.fleet.worker import FleetWorker, WorkerSettings
from perfline.records.job import Case
from perfline.records.status import RunStatus
from perfline.runner import kexec_resume
from perfline.store import Store
from perfline.store.kexec_boots import KexecBoot
from perfline.system.pgserver import PrivateServer
from perfline.targets import local, machine_settings
from perfline.targets.kernels import CACHE_ENV, Kernel
from test_kexec_target import DEFAULT_CMDLINE, RELEASE_61, machine

pytestmark = pytest.mark.postgres

CLASS = "kexec-lab"
VERSION_61 = "#1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1 (2026-11-01)"
PANIC = "<0>[    2.1] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Dev", "-c", "user.email=dev@example.org",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def kernel_tree(repo: Path, subjects: tuple[str, ...] = (
        "base", "sched: a change whose kernel panics at boot", "mm: a fine change")) -> list[str]:
    """A commit per subject; the builds the test puts in the image directory stand for them."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for subject in subjects:
        (repo / "Makefile").write_text(f"# {subject}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject)
    return git(repo, "rev-list", "--reverse", "HEAD").split()


TRACKER = """\
name: lab
repo: ./linux
branch: main
since: HEAD~2
build:
  kernel:
    config: tiny.config
jobs:
  - benchmark: command
    params: {cmd: "echo 1.0", metric: seconds, unit: s, direction: lower}
    repeat: 5
    warmup: 0
    monitors: []
narrow: false
fleet:
  class: kexec-lab
"""


def boots_into(root: Path, release: str, version: str, cmdline: str, boot_id: str) -> None:
    """The machine after a (re)boot, as /proc shows it."""
    machine(root, release, version, cmdline, boot_id)
    (root / "etc/machine-id").write_text(local.machine_id() + "\n")


@dataclass(frozen=True)
class Lab:
    """The lab machine as the test plays it: its store, settings, boot steps and /proc."""

    url: str
    tested: Kernel
    root: Path
    steps: kexec_resume.BootSteps
    staged: list[tuple[str, str]]
    images: Path
    config: Path

    def publish(self, shas: list[str]) -> None:
        """Another worker built these commits: the image directory holds them by config and commit."""
        key = kernel.keep_config_bytes(self.config.read_bytes()).stem
        for sha in shas:
            kept = self.images / key / sha
            kept.mkdir(parents=True)
            shutil.copyfile(self.tested.image, kept / kernel.KEPT_IMAGE)
            shutil.copyfile(self.tested.config_path, kept / kernel.KEPT_CONFIG)

    def worker(self, store: Store, queue: FleetQueue, said: list[str]) -> FleetWorker:
        return FleetWorker(store, queue, describe("lab1", CLASS), WorkerSettings(stalled_s=3.0, poll_s=0.2),
                           said.append, images=self.images, boot_steps=self.steps)

    def comes_up(self, boot: KexecBoot, boot_id: str) -> None:
        """The boot's kernel runs: its release and build, the command line it was given."""
        boots_into(self.root, boot.release, boot.banner.split(") ", 1)[1], boot.cmdline, boot_id)


@pytest.fixture
def lab(tmp_path: Path, debian_kernels: dict[str, Kernel], postgres_server: PrivateServer,
        monkeypatch: pytest.MonkeyPatch) -> Lab:
    url = postgres_server.create_database(f"fleet_kernels_{tmp_path.name[-24:].replace('-', '_')}")
    monkeypatch.setenv("PERFLINE_DB", url)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    tested = debian_kernels["debian-6.12"]
    # The machine's administrator opted in and installed the resume unit, in this test's
    # own settings file (the session's must stay unopted: test_kexec_target checks it).
    monkeypatch.setenv(machine_settings.SETTINGS_ENV, str(tmp_path / "machine.yaml"))
    machine_settings.allow_kexec()
    unit = tmp_path / "units" / "perfline-resume.service"
    unit.parent.mkdir()
    unit.write_text("[Unit]\n")
    machine_settings.set_resume_unit(unit)
    root = tmp_path / "machine"
    boots_into(root, RELEASE_61, VERSION_61, DEFAULT_CMDLINE, "boot-0")
    (root / "boot").mkdir()
    (root / "boot" / f"initrd.img-{tested.release}").write_text("the kernel's initramfs\n")
    staged: list[tuple[str, str]] = []
    steps = kexec_resume.BootSteps(root=root, stage=lambda image, line: staged.append((image.name, line)),
                                  boot=lambda: None)
    config = tmp_path / "tiny.config"
    config.write_text("CONFIG_EXAMPLE=y\n")
    return Lab(url, tested, root, steps, staged, tmp_path / "images", config)


def test_a_kernel_tracker_on_the_fleet_boots_each_commit_and_one_that_does_not_boot_is_untestable(
    tmp_path: Path, lab: Lab
) -> None:
    url, root = lab.url, lab.root
    commits = kernel_tree(tmp_path / "linux")
    base, panics, fine = commits
    (tmp_path / "tracker.yaml").write_text(TRACKER)
    lab.publish(commits)

    env = {**os.environ, "PERFLINE_DB": url, CACHE_ENV: str(tmp_path / "tracker-cache")}
    with (tmp_path / "track.log").open("w") as log:
        tracking = subprocess.Popen([sys.executable, "-m", "perfline", "track", "run", str(tmp_path / "tracker.yaml"),
                                     "--once"], env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    store = Store.open(url)
    said: list[str] = []
    try:
        with FleetQueue(url) as queue:
            deadline = time.monotonic() + 180
            while len(queue.jobs()) < 3:
                assert tracking.poll() is None and time.monotonic() < deadline, (tmp_path / "track.log").read_text()
                time.sleep(0.2)
            for number in range(1, 4):
                why = lab.worker(store, queue, said).serve()
                assert why.startswith("kexec boot") and "booting" in why, said
                boot = store.open_kexec_boot(local.machine_id())
                assert boot is not None and boot.state == "pending" and boot.fleet_attempt is not None
                # While the machine boots, its worker is silent: the sweep leaves the job alone.
                assert take_back_stalled(store, queue, 0.0) == []
                [job] = [j for j in queue.jobs() if j.status == "doing"]
                [shown] = fleet_status(store, queue, 0.0).machines
                assert shown.state == "booting", shown
                if boot.kernel_commit == panics:
                    # panic=10 reset the machine; the firmware booted its default; ramoops kept the panic.
                    pstore = root / "var/lib/systemd/pstore/1764194400"
                    pstore.mkdir(parents=True)
                    (pstore / "dmesg-ramoops-0").write_text("Panic#1 Part1\n" + PANIC)
                    boots_into(root, RELEASE_61, VERSION_61, DEFAULT_CMDLINE, f"boot-{number}a")
                else:
                    lab.comes_up(boot, f"boot-{number}a")
                    measured = resume_here(store, root)
                    assert measured.outcome == "measured" and measured.reboot, measured
                    assert store.attempt(boot.fleet_attempt).state == "succeeded"
                    boots_into(root, RELEASE_61, VERSION_61, DEFAULT_CMDLINE, f"boot-{number}b")
                back = resume_here(store, root)
                assert back.outcome == ("boot-failed" if boot.kernel_commit == panics else "returned"), back
                assert queue.jobs(job.id)[0].status in ("succeeded", "failed")
            store.set_hold("lab1", "drain")
            assert "drained" in lab.worker(store, queue, said).serve()
        assert tracking.wait(timeout=180) == 0, (tmp_path / "track.log").read_text()
    finally:
        if tracking.poll() is None:
            tracking.kill()
            tracking.wait()
    tracked = (tmp_path / "track.log").read_text()

    # Each commit's kernel was staged with the default's line, panic=10 and its token.
    assert [name for name, _ in lab.staged] == [f"track-lab-{sha[:12]}" for sha in commits]
    assert all("panic=10 oops=panic perfline.boot=" in line for _, line in lab.staged)
    boots = {b.kernel_commit: b for b in store.kexec_boots()}
    assert {sha: boots[sha].state for sha in commits} == {base: "returned", panics: "boot-failed", fine: "returned"}
    assert "Attempted to kill init" in str(boots[panics].console)
    # Two completed runs, each on its commit's booted kernel; none for the kernel that did not boot.
    runs = [r for r in store.list_runs(50) if r.label == "lab"]
    assert sorted(str(r.kernel_commit) for r in runs) == sorted([base, fine])
    for run in runs:
        detail = store.get_run(run.id)
        assert detail.info.status == RunStatus.COMPLETED and detail.info.target == "kexec"
        assert detail.fingerprint["boot"]["how"] == "kexec" and detail.fingerprint["boot"]["from"] == RELEASE_61
        assert detail.fingerprint["boot"]["kernel"] == f"track-lab-{str(run.kernel_commit)[:12]}"
    # The jobs ended as their boots: the panicking one failed `boot-failed`, once.
    attempts = store.attempts()
    assert [a.state for a in attempts] == ["succeeded", "failed", "succeeded"]
    assert str(attempts[1].error).startswith("boot-failed: ") and "not booted by perfline" in str(attempts[1].error)
    assert "untestable: its kernel did not boot" in tracked and panics[:12] in tracked
    # The health job ran at the start and after every return to the default kernel (not
    # after the last: the machine was drained), each after the boot before it had closed.
    health = sorted((r for r in store.list_runs(50) if r.label == "fleet-health"), key=lambda r: r.id)
    assert len(health) == 3
    for before, after in zip(sorted(boots.values(), key=lambda b: b.id), health[1:], strict=False):
        assert after.started_at > before.updated_at

    # The next pass has nothing to test: the boot failure is an answer, not retried.
    again = subprocess.run([sys.executable, "-m", "perfline", "track", "run", str(tmp_path / "tracker.yaml"),
                            "--once"], env=env, capture_output=True, text=True, timeout=180, check=False)
    assert again.returncode == 0, again.stderr
    assert "queued" not in again.stderr + again.stdout
    status = json.loads(subprocess.run([sys.executable, "-m", "perfline", "track", "status", "lab", "--json"],
                                       env=env, capture_output=True, text=True, timeout=120, check=True).stdout)
    [lab] = status
    assert lab["tested"] == 2 and lab["pending"] == 0, lab


def test_a_machine_that_never_comes_back_from_a_kernel_ends_its_job_boot_failed_once(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past $PERFLINE_FLEET_BOOT_S the sweep ends the job `boot-failed`, not queued for
    another machine; the machine coming back late (slow, not dead) completes nothing."""
    sha = "c0ffee" * 6 + "c0ff"
    lab.publish([sha])
    case = kernel.kexec_case(Case("lab-job1", "command", {"cmd": "echo 1.0", "metric": "seconds", "unit": "s",
                                                          "direction": "lower"}, {}, 5, 0, (), "local"), "lab")
    store = Store.open(lab.url)
    said: list[str] = []
    with FleetQueue(lab.url) as queue:
        [job_id] = queue.submit(f"class:{CLASS}", [kernel_jobs.job_args(case, "lab", sha, "/nonexistent",
                                                                         lab.config.read_text())])
        assert "booting" in lab.worker(store, queue, said).serve()
        boot = store.open_kexec_boot(local.machine_id())
        assert boot is not None and boot.fleet_attempt is not None
        assert take_back_stalled(store, queue, 0.0) == []
        monkeypatch.setenv(kernel_jobs.BOOT_S_ENV, "0")
        [taken] = take_back_stalled(store, queue, 0.0)
        assert taken.boot_failed and not taken.requeued
        assert queue.jobs(job_id)[0].status == "failed"
        attempt = store.attempt(boot.fleet_attempt)
        assert attempt.state == "failed" and "did not come back" in str(attempt.error)
        # It was only slow: the tested kernel comes up after all, and measures into nothing.
        lab.comes_up(boot, "boot-late")
        late = resume_here(store, lab.root)
        assert late.outcome == "measured"
        assert [store.get_run(i).info.status for i in store.kexec_boot(boot.id).run_ids] == [RunStatus.INTERRUPTED]
        assert queue.jobs(job_id)[0].status == "failed" and len(store.attempts([job_id])) == 1


@pytest.mark.parametrize(("edit", "says"), [
    (("    warmup: 0\n", "    warmup: 0\n    target: qemu\n    kernel: debian-6.1\n"), "target 'qemu': a kernel tracker on the fleet boots"),
])
def test_what_a_kernel_tracker_on_the_fleet_cannot_do_is_one_line_before_anything_runs(
    tmp_path: Path, edit: tuple[str, str], says: str, debian_kernels: dict[str, Kernel]
) -> None:
    from test_qemu_target import TEST_CACHE

    kernel_tree(tmp_path / "linux")
    (tmp_path / "tiny.config").write_text("CONFIG_EXAMPLE=y\n")
    (tmp_path / "tracker.yaml").write_text(TRACKER.replace(*edit))
    db = tmp_path / "store.db"
    done = subprocess.run([sys.executable, "-m", "perfline", "--db", str(db), "track", "run",
                           str(tmp_path / "tracker.yaml"), "--once"], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, CACHE_ENV: str(TEST_CACHE)})
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: ") and says in done.stderr
    assert not db.exists()
