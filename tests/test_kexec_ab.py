"""`ab --target kexec`: the sides on different kernels of one machine, one boot per block
of repetitions, the blocks interleaved, the ab going on from the store after every boot.

The boot is the edge, as in test_kexec_target.py: the machine is a tree of /proc and
/etc files under tmp_path that the test "boots" into the kernel each step staged, and
the boot step records instead of booting. The measuring is real: `resume_here` runs the
block's case (the command benchmark, whose value depends on which kernel "runs") and
stores it with the booted kernel's fingerprint; the comparison is the real one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfline.analysis import kexec_ab
from perfline.cli.kexec import resume_here
from perfline.jobs.command_line import CommandLineJob, Target, build_ab
from perfline.records.job import Case
from perfline.runner import kexec_resume, kexec_series
from perfline.store import Store
from perfline.store.kexec_boots import KexecBoot
from perfline.targets import kexec, machine_settings
from perfline.targets.kernels import CACHE_ENV, Kernel
from test_kexec_target import DEFAULT_CMDLINE, RELEASE_61, machine

VERSION_61 = "#1 SMP PREEMPT_DYNAMIC Debian 6.1"
# What the benchmark reads: the "kernel's" speed, set when the test boots the tree into it.
SPEED = {"debian-6.1": 1.0, "debian-6.12": 1.3}


class Lab:
    """The machine as the test plays it: its tree, its settings, what it was asked to boot."""

    def __init__(self, tmp_path: Path, kernels: dict[str, Kernel]) -> None:
        self.root = machine(tmp_path / "root", RELEASE_61, VERSION_61, DEFAULT_CMDLINE, "boot-0")
        (self.root / "boot").mkdir()
        for kernel in kernels.values():
            (self.root / "boot" / f"initrd.img-{kernel.release}").write_text("initramfs\n")
        self.kernels = kernels
        self.value = tmp_path / "value"
        self.value.write_text("1.0\n")
        settings = machine_settings.allow_kexec(tmp_path / "machine.yaml")
        (tmp_path / kexec.RESUME_UNIT).write_text("[Unit]\n")
        self.settings = machine_settings.set_resume_unit(tmp_path / kexec.RESUME_UNIT, settings.path)
        self.staged: list[str] = []
        self.booted = 0
        self.steps = kexec_resume.BootSteps(root=self.root, stage=lambda image, _line: self.staged.append(image.name),
                                            boot=self.boot)
        self.db = tmp_path / "db"
        self.store = Store.open(str(self.db))

    def boot(self) -> None:
        self.booted += 1

    def comes_up(self, boot: KexecBoot) -> None:
        """The staged kernel runs: its release, build and command line, and its speed."""
        machine(self.root, boot.release, boot.banner.split(") ", 1)[1], boot.cmdline, f"boot-{boot.id}-in")
        self.value.write_text(f"{SPEED[boot.kernel]}\n")

    def comes_back(self, boot: KexecBoot, failed: bool = False) -> None:
        """The firmware's default again (after the reboot, or a panic's reset)."""
        machine(self.root, RELEASE_61, VERSION_61, DEFAULT_CMDLINE, f"boot-{boot.id}-back{'-reset' if failed else ''}")


def sides(lab: Lab, pairs: int) -> tuple[Case, Case]:
    cmd = (f"{sys.executable} -c \"import random; print(float(open('{lab.value}').read()) * "
           "random.gauss(1, 0.01))\"")
    request = CommandLineJob("command", [f"cmd={cmd}", "metric=seconds", "unit=s", "direction=lower"], None, True,
                             warmup=0, target=Target("kexec"))
    return build_ab(request, ["kernel:debian-6.1"], ["kernel:debian-6.12"], pairs)


@pytest.fixture
def lab(tmp_path: Path, debian_kernels: dict[str, Kernel], monkeypatch: pytest.MonkeyPatch) -> Lab:
    from test_qemu_target import TEST_CACHE

    monkeypatch.setenv(CACHE_ENV, str(TEST_CACHE))
    return Lab(tmp_path, debian_kernels)


def test_an_ab_over_kexec_boots_interleaves_blocks_and_goes_on_from_the_store(lab: Lab) -> None:
    case_a, case_b = sides(lab, 6)
    series, first = kexec_series.start_ab(lab.store, case_a, case_b, 6, 3, lab.settings, label="sched",
                                          kernel_commit=None, compare={"alpha": 0.05, "floor": 1.0,
                                                                       "metric_floors": {}}, steps=lab.steps)
    assert [step["side"] for step in series.steps] == ["A", "B", "B", "A", "A", "B"]
    assert lab.staged == ["debian-6.1"] and lab.booted == 1
    boot, said = first, []
    while boot is not None:
        lab.comes_up(boot)
        measured = resume_here(lab.store, lab.root)
        assert measured.outcome == "measured" and measured.reboot and len(measured.boot.run_ids) == 1
        lab.comes_back(boot)
        back = resume_here(lab.store, lab.root)
        assert back.outcome == "returned"
        said.append(kexec_series.go_on(lab.store, back.boot, lab.settings, lab.steps))
        boot = lab.store.open_kexec_boot(boot.machine_id)
    # One boot per block, in the planned order, each from the default kernel.
    assert lab.staged == ["debian-6.1", "debian-6.12", "debian-6.12", "debian-6.1", "debian-6.1", "debian-6.12"]
    assert lab.booted == 6 and "booting block 2 (B, debian-6.12)" in str(said[0])
    assert "all 6 blocks measured" in str(said[-1]) and lab.store.kexec_series(series.id).state == "done"
    boots = lab.store.series_boots(series.id)
    assert [b.series_step for b in boots] == list(range(6)) and all(b.state == "returned" for b in boots)
    runs = [lab.store.get_run(b.run_ids[0]) for b in boots]
    assert [len(run.samples) for run in runs] == [2] * 6 and {run.info.label for run in runs} == {"sched"}
    assert {run.fingerprint["boot"]["kernel"] for run in runs} == {"debian-6.1", "debian-6.12"}
    # Each block a unit: B's kernel is 30% slower, and three boots a side show it.
    compared = kexec_ab.comparison(lab.store, lab.store.kexec_series(series.id))
    assert compared is not None and [len(side.runs) for side in compared.sides] == [3, 3]
    (row,) = [row for row in compared.rows if row.metric.name.endswith("seconds")]
    (change,) = row.others
    assert change is not None and change.significant and 25 < change.change_pct < 35
    assert any("ab over kexec boots" in note for note in compared.notes)
    # `kernels series` shows the blocks, their boots and runs, and the comparison.
    shown = subprocess.run([sys.executable, "-m", "perfline", "--db", str(lab.db), "kernels", "series",
                            str(series.id), "--json"], capture_output=True, text=True, timeout=120, check=True)
    data = json.loads(shown.stdout)
    assert data["state"] == "done" and [b["series_step"] for b in data["boots"]] == list(range(6))
    assert [side["name"] for side in data["comparison"]["sides"]] == ["A (debian-6.1, 3 boots)",
                                                                       "B (debian-6.12, 3 boots)"]


def test_a_block_whose_kernel_does_not_boot_ends_the_ab_failed(lab: Lab) -> None:
    case_a, case_b = sides(lab, 4)
    series, boot = kexec_series.start_ab(lab.store, case_a, case_b, 4, 2, lab.settings, label=None,
                                         kernel_commit=None, compare={"alpha": 0.01, "floor": 1.0,
                                                                      "metric_floors": {}}, steps=lab.steps)
    lab.comes_up(boot)
    resume_here(lab.store, lab.root)
    lab.comes_back(boot)
    nxt = kexec_series.go_on(lab.store, resume_here(lab.store, lab.root).boot, lab.settings, lab.steps)
    assert "booting block 2" in str(nxt)
    second = lab.store.open_kexec_boot(boot.machine_id)
    assert second is not None and second.kernel == "debian-6.12"
    # B's kernel panicked; panic=10 reset the machine into its default.
    lab.comes_back(second, failed=True)
    failed = resume_here(lab.store, lab.root)
    assert failed.outcome == "boot-failed"
    said = kexec_series.go_on(lab.store, failed.boot, lab.settings, lab.steps)
    stored = lab.store.kexec_series(series.id)
    assert stored.state == "failed" and "block 2 of 4 (B, debian-6.12) did not boot" in str(stored.error)
    assert "failed" in str(said) and lab.booted == 2 and lab.store.open_kexec_boot(boot.machine_id) is None
    # Not a crash: the runs so far stay, and a comparison needs both sides.
    assert kexec_ab.comparison(lab.store, stored) is None


def test_both_sides_are_checked_before_anything_is_written(lab: Lab) -> None:
    case_a, case_b = sides(lab, 4)
    (lab.root / "boot" / f"initrd.img-{lab.kernels['debian-6.12'].release}").unlink()
    with pytest.raises(kexec.KexecRefused, match="no modules installed"):
        kexec_series.start_ab(lab.store, case_a, case_b, 4, 2, lab.settings, label=None, kernel_commit=None,
                              compare={"alpha": 0.01, "floor": 1.0, "metric_floors": {}}, steps=lab.steps)
    assert lab.staged == [] and lab.store.kexec_boots() == [] and lab.store.kexec_series_list() == []


def test_abandoning_a_block_abandons_its_ab(lab: Lab) -> None:
    case_a, case_b = sides(lab, 2)
    series, _boot = kexec_series.start_ab(lab.store, case_a, case_b, 2, 1, lab.settings, label=None,
                                          kernel_commit=None, compare={"alpha": 0.01, "floor": 1.0,
                                                                       "metric_floors": {}}, steps=lab.steps)
    assert kexec_resume.abandon(lab.store, lab.root) is not None
    assert lab.store.kexec_series(series.id).state == "abandoned"


@pytest.mark.parametrize(("args", "unit", "says"), [
    (["--pairs", "auto"], True, "--pairs auto with target kexec"),
    (["--pairs", "4", "--blocks", "5"], True, "--blocks 5: give 1 to --pairs (4) boots a side"),
    (["--pairs", "4"], False, "no resume unit: run `perfline kernels install-resume`"),
    (["--pairs", "4", "--b", "kernel:debian-7"], True, "unknown kernel 'debian-7'"),
])
def test_what_an_ab_over_boots_cannot_do_is_one_line(args: list[str], unit: bool, says: str, tmp_path: Path,
                                                    debian_kernels: dict[str, Kernel],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from test_qemu_target import TEST_CACHE

    # This test's own settings, opted in (the session's stay as they are for the other tests).
    monkeypatch.setenv(machine_settings.SETTINGS_ENV, str(tmp_path / "machine.yaml"))
    machine_settings.allow_kexec(machine_settings.settings_path())
    if unit:
        (tmp_path / kexec.RESUME_UNIT).write_text("[Unit]\n")
        machine_settings.set_resume_unit(tmp_path / kexec.RESUME_UNIT)
    proc = subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "ab", "rcu-gp",
                           "--target", "kexec", "--a", "kernel:debian-6.1", "--b", "kernel:debian-6.12", *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, CACHE_ENV: str(TEST_CACHE)})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert says in proc.stderr and not (tmp_path / "db").exists()


def test_one_machine_in_two_kernels_is_not_two_machines() -> None:
    from perfline.records.fingerprint import differences

    one = {"machine_id": "m1", "memory_bytes": "1018179584", "kernel_release": RELEASE_61,
           "cmdline": "root=/dev/vda panic=10 perfline.boot=8d65876e75732878"}
    other = {**one, "memory_bytes": "1012760576", "kernel_release": "6.12.117+deb12-cloud-amd64",
             "cmdline": "root=/dev/vda panic=10 perfline.boot=66737cf31b4706c7"}
    found = {d.key: d.kind for d in differences(flatten(one), flatten(other))}
    # Each kernel keeps its own share of the RAM; the boot token is new at every boot.
    assert found == {"memory_bytes": "kernel", "kernel_release": "kernel"}
    # Another machine's memory is still a difference of the machine.
    elsewhere = {**other, "machine_id": "m2"}
    assert {d.key: d.kind for d in differences(flatten(one), flatten(elsewhere))}["memory_bytes"] == "machine"


def flatten(facts: dict[str, str]) -> dict[str, str]:
    from perfline.records.fingerprint import flatten as flat

    return {key: value for key, value in flat(facts).items() if value != "None"}
