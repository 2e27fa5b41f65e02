"""`bisect start --kernel-tree` with a job of target kexec: one machine boots each probe's
kernel, and the bisection goes on from the store after every boot.

The tree is test_kernel_bisect's stand-in (its `make bzImage` copies a small image that
names a release); the boot is the edge, as in test_kexec_target.py: the machine is a
tree of /proc and /etc files that the test "boots" into the release each boot staged,
and the boot step records. Everything else is real: the builds, the registry, the
bisection's driver and store, `resume_here` measuring the probe on the booted kernel
(the command benchmark, whose value depends on the release that "runs").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfline.bisect import session
from perfline.cli.kexec import resume_here
from perfline.records.errors import UserError
from perfline.records.status import BisectionStatus
from perfline.runner import kexec_resume
from perfline.runner.kexec_resume import MachineBooting
from perfline.store import Store
from perfline.store.bisections import BisectionNotFound
from perfline.store.kexec_boots import KexecBoot
from perfline.targets import kernels, kexec, machine_settings
from test_kernel_bisect import fake_bzimage, kernel_tree
from test_kexec_target import DEFAULT_CMDLINE, RELEASE_61, machine

OLD, NEW = "6.1.0-test", "6.12.0-test"
CULPRIT, COMMITS, DEAD = 5, 8, 3  # commit 3's kernel panics at boot
VERSION_61 = "#1 SMP Debian 6.1"
JOB = """\
benchmark: command
params:
  cmd: "{python} -c \\"import random; print(float(open('{value}').read()) * random.gauss(1, 0.005))\\""
  metric: ms
  unit: ms
  direction: lower
target: kexec
kernel: placeholder    # any registered kernel: each probe boots its own build
monitors: []
"""


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    import sys

    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(machine_settings.SETTINGS_ENV, str(tmp_path / "machine.yaml"))
    machine_settings.allow_kexec()
    (tmp_path / kexec.RESUME_UNIT).write_text("[Unit]\n")
    machine_settings.set_resume_unit(tmp_path / kexec.RESUME_UNIT)
    old, new = fake_bzimage(tmp_path / "old.img", OLD), fake_bzimage(tmp_path / "new.img", NEW)
    shas = kernel_tree(tmp_path / "linux", [old if i < CULPRIT else new for i in range(COMMITS)])
    kernels.add_image(new, "placeholder")
    (tmp_path / "job.yaml").write_text(JOB.format(python=sys.executable, value=tmp_path / "value"))
    # Built without module support: the probes' kernels boot without an initramfs.
    (tmp_path / "my.config").write_text("# CONFIG_MODULES is not set\n")
    root = machine(tmp_path / "root", RELEASE_61, VERSION_61, DEFAULT_CMDLINE, "boot-0")
    return {"shas": shas, "root": root, "tmp": tmp_path}


def test_a_kernel_bisection_boots_each_probe_and_goes_on_after_every_boot(lab: dict[str, object]) -> None:
    tmp, root, shas = Path(str(lab["tmp"])), Path(str(lab["root"])), list(lab["shas"])  # type: ignore[call-overload]
    store = Store.open(str(tmp / "db"))
    staged: list[str] = []
    steps = kexec_resume.BootSteps(root=root, stage=lambda image, _line: staged.append(image.name),
                                   boot=lambda: None)
    record = session.start(store, session.StartRequest(
        good=shas[0], bad=shas[-1], kernel_tree=tmp / "linux", config=tmp / "my.config", job=tmp / "job.yaml",
        metric="command.ms", direction="lower", max_runs=60), lambda _m: None)
    passes = 0
    while True:
        passes += 1
        assert passes < 80, "the bisection did not end"
        try:
            outcome = session.run(store, store.bisection(record.id), lambda *_: None, lambda _m: None,
                                  pace_tolerance=None, boot_steps=steps)
            break
        except MachineBooting as booting:
            boot = booting.boot
        index = shas.index(boot.kernel_commit)
        if index == DEAD:  # panic=10 reset the machine: the firmware's default comes back
            machine(root, RELEASE_61, VERSION_61, DEFAULT_CMDLINE, f"boot-{boot.id}-reset")
            assert resume_here(store, root).outcome == "boot-failed"
            continue
        machine(root, boot.release, boot.banner.split(") ", 1)[1], boot.cmdline, f"boot-{boot.id}-in")
        (tmp / "value").write_text("1.0\n" if boot.release == OLD else "1.3\n")
        assert resume_here(store, root).outcome == "measured"
        machine(root, RELEASE_61, VERSION_61, DEFAULT_CMDLINE, f"boot-{boot.id}-back")
        assert resume_here(store, root).outcome == "returned"
    assert outcome.result.status == BisectionStatus.FOUND and outcome.culprit() == shas[CULPRIT]
    # One boot a probe: every sample is the run of its own boot of its commit's build.
    samples = store.bisect_samples(record.id)
    boots = {b.run_ids[0]: b for b in store.kexec_boots(limit=1000) if b.run_ids}
    assert len(boots) == len(samples) == len(staged) - staged.count(f"bisect-{record.id}-{shas[DEAD][:12]}")
    for sample in samples:
        boot: KexecBoot = boots[sample.run_id]
        assert boot.kernel_commit == shas[sample.commit_index] and boot.label == f"bisect-{record.id}"
        run = store.get_run(sample.run_id)
        assert run.fingerprint["boot"]["how"] == "kexec" and run.info.kernel_commit == boot.kernel_commit
    # The kernel that did not boot: one boot, then untestable (if the bisection probed it).
    if f"bisect-{record.id}-{shas[DEAD][:12]}" in staged:
        assert staged.count(f"bisect-{record.id}-{shas[DEAD][:12]}") == 1
        assert outcome.untestable.get(DEAD) == "its kernel did not boot"
    (series,) = store.kexec_series_list()
    assert series.kind == "bisect" and series.settings == {"bisection": record.id}


def test_a_kexec_bisection_on_a_machine_that_did_not_opt_in_is_refused_before_it_is_stored(
        lab: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(machine_settings.SETTINGS_ENV, str(tmp_path / "other.yaml"))
    shas = list(lab["shas"])  # type: ignore[call-overload]
    store = Store.open(str(tmp_path / "db"))
    with pytest.raises(UserError, match="perfline kernels allow-kexec"):
        session.start(store, session.StartRequest(
            good=shas[0], bad=shas[-1], kernel_tree=tmp_path / "linux", config=tmp_path / "my.config",
            job=tmp_path / "job.yaml", metric="command.ms", direction="lower"), lambda _m: None)
    with pytest.raises(BisectionNotFound):
        store.bisection()
