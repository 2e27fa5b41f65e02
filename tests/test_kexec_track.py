"""`track` on one machine with a job of target kexec: each tested commit's kernel is a
boot of this machine, and the tracker's pass goes on from the store after every boot.

The tree is test_kernel_bisect's stand-in (its `make bzImage` copies a small image that
names a release); the boot is the edge, as in test_kexec_bisect.py: the machine is a
tree of /proc and /etc files that the test "boots" into the release each boot staged,
and the boot step records. Everything else is real: the builds, the registry, the
tracker's pass and store, `resume_here` measuring the commit on the booted kernel (the
command benchmark, whose value depends on the release that "runs"), and `perfline
resume`'s hand-over to the tracker (`go_on_with_tracker`, which runs the pass on).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from perfline.analysis.regressions import transition
from perfline.cli.kexec import go_on, resume_here
from perfline.cli.track import carry_on
from perfline.runner import RunContext, kexec_resume
from perfline.runner.kexec_resume import MachineBooting
from perfline.runner.loop import Observer
from perfline.store import Store
from perfline.store.kexec_boots import KexecBoot
from perfline.targets import kernels, kexec, local, machine_settings
from perfline.track.status import tracker_states
from perfline.track.tracker_file import load_tracker
from perfline.track.tracking import run_pass
from test_kernel_bisect import fake_bzimage, kernel_tree
from test_kexec_bisect import JOB as BISECT_JOB
from test_kexec_bisect import NEW, OLD, VERSION_61
from test_kexec_target import DEFAULT_CMDLINE, RELEASE_61, machine, perfline

CULPRIT, COMMITS, DEAD = 5, 8, 2  # commit 2's kernel panics at boot
NAME = "lab"
# test_kexec_bisect's job, with the 5 repetitions a tracker's comparison of neighbours needs.
JOB = BISECT_JOB.replace("monitors: []", "repeat: 5\nmonitors: []")
TRACKER = f"""\
name: {NAME}
repo: ./linux
branch: HEAD
since: {{since}}
select:
  every: 2
build:
  kernel:
    config: my.config
jobs:
  - job.yaml
narrow: true
"""


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(machine_settings.SETTINGS_ENV, str(tmp_path / "machine.yaml"))
    old, new = fake_bzimage(tmp_path / "old.img", OLD), fake_bzimage(tmp_path / "new.img", NEW)
    shas = kernel_tree(tmp_path / "linux", [old if i < CULPRIT else new for i in range(COMMITS)])
    kernels.add_image(new, "placeholder")
    (tmp_path / "job.yaml").write_text(JOB.format(python=sys.executable, value=tmp_path / "value"))
    # Built without module support: the commits' kernels boot without an initramfs.
    (tmp_path / "my.config").write_text("# CONFIG_MODULES is not set\n")
    (tmp_path / "tracker.yaml").write_text(TRACKER.format(since=shas[0]))
    root = machine(tmp_path / "root", RELEASE_61, VERSION_61, DEFAULT_CMDLINE, "boot-0")
    return {"shas": shas, "root": root, "tmp": tmp_path}


def allow(tmp: Path) -> None:
    machine_settings.allow_kexec()
    (tmp / kexec.RESUME_UNIT).write_text("[Unit]\n")
    machine_settings.set_resume_unit(tmp / kexec.RESUME_UNIT)


def boot_until_done(store: Store, tmp: Path, root: Path, steps: kexec_resume.BootSteps, boot: KexecBoot | None,
                    resets: Callable[[KexecBoot], bool]) -> None:
    """The machine's boots as its firmware and `perfline resume` carry them: each staged
    kernel comes up, measures and comes back, unless `resets` says it dies at boot
    (panic=10 resets the machine: the firmware's default comes back)."""
    boots = 0
    while boot is not None:
        boots += 1
        assert boots < 60, "the tracker did not end"
        if resets(boot):
            machine(root, RELEASE_61, VERSION_61, DEFAULT_CMDLINE, f"boot-{boot.id}-reset")
            closed = resume_here(store, root)
            assert closed.outcome == "boot-failed"
        else:
            machine(root, boot.release, boot.banner.split(") ", 1)[1], boot.cmdline, f"boot-{boot.id}-in")
            (tmp / "value").write_text("1.0\n" if boot.release == OLD else "1.3\n")
            assert resume_here(store, root).outcome == "measured"
            machine(root, RELEASE_61, VERSION_61, DEFAULT_CMDLINE, f"boot-{boot.id}-back")
            closed = resume_here(store, root)
            assert closed.outcome == "returned"
        assert closed.boot is not None
        go_on(store, closed.boot, steps)  # what `perfline resume` does next, on the default kernel
        boot = store.open_kexec_boot(local.machine_id(root))


def first_pass(lab: dict[str, object]) -> tuple[Store, Path, Path, list[str], kexec_resume.BootSteps, list[str],
                                                 KexecBoot]:
    """The lab opted in and the tracker's first pass, stopped at its first boot."""
    tmp, root, shas = Path(str(lab["tmp"])), Path(str(lab["root"])), list(lab["shas"])  # type: ignore[call-overload]
    allow(tmp)
    store = Store.open(str(tmp / "db"))
    staged: list[str] = []
    steps = kexec_resume.BootSteps(root=root, stage=lambda image, _line: staged.append(image.name),
                                   boot=lambda: None)
    with pytest.raises(MachineBooting) as first:
        a_pass(store, tmp, steps)
    return store, tmp, root, shas, steps, staged, first.value.boot


def a_pass(store: Store, tmp: Path, steps: kexec_resume.BootSteps,
           notify: Callable[[str], None] = lambda _m: None) -> None:
    """The tracker's pass as `track run` makes it (MachineBooting when it boots a kernel)."""
    spec = load_tracker(tmp / "tracker.yaml")
    # Every case is a boot: nothing runs in the pass's own process, so no observer is told anything.
    ctx = RunContext(store=store, fingerprint=local.fingerprint, observer=cast(Observer, object()))
    run_pass(store, spec, ctx, lambda *_: None, notify, None, boot_steps=steps)


def test_a_kexec_tracker_boots_each_tested_commit_and_goes_on_after_every_boot(lab: dict[str, object]) -> None:
    store, tmp, root, shas, steps, staged, first = first_pass(lab)
    boot_until_done(store, tmp, root, steps, first, lambda boot: shas[DEAD][:12] in boot.kernel)
    # Every selected commit (every 2nd, and the head) booted once, the dead one too (once
    # in all); then the change's confirmation, 3 boots a side interleaved (AB BA AB).
    selected = [shas[i] for i in (0, 2, 4, 6, 7)]
    assert staged[:5] == [f"track-{NAME}-{sha[:12]}" for sha in selected]
    good, bad = f"track-{NAME}-{shas[4][:12]}", f"track-{NAME}-{shas[6][:12]}"
    assert staged[5:11] == [good, bad, bad, good, good, bad]
    assert sum(shas[DEAD][:12] in name for name in staged) == 1
    runs = {store.get_run(i).info.kernel_commit: store.get_run(i) for i in store.find_runs(label=NAME)}
    assert set(runs) == set(selected) - {shas[DEAD]}
    by_run = {b.run_ids[0]: b for b in store.kexec_boots(limit=100) if b.run_ids}
    for sha, run in runs.items():
        assert run.info.status == "completed" and run.fingerprint["boot"]["how"] == "kexec"
        assert run.fingerprint["boot"]["kernel"] == f"track-{NAME}-{sha[:12]}"
        assert by_run[run.info.id].release == (OLD if shas.index(sha) < CULPRIT else NEW)
    assert store.boot_failed_commits(NAME).keys() == {shas[DEAD]}
    # Judged after the last tested commit's boot: the step between commits 4 and 6,
    # confirmed over boots, then bisected to commit 5, one boot a probe.
    [regression] = [r for r in store.regressions(tracker=NAME) if r.kind == "regression"]
    assert (regression.good, regression.bad) == (shas[4], shas[6])
    assert regression.status == "bisected" and regression.culprit == shas[CULPRIT], regression
    assert regression.bisection_id is not None
    probes = [name for name in staged if name.startswith(f"bisect-{regression.bisection_id}-")]
    assert probes and len(staged) == 11 + len(probes)
    series = {one.kind: one for one in store.kexec_series_list()}
    assert series.keys() == {"track", "ab", "bisect"} and {one.state for one in series.values()} == {"done"}
    assert series["track"].settings == {"tracker": NAME} and series["ab"].settings["regression"] == regression.id
    assert len(store.find_runs(label=f"confirm-{regression.id}")) == 6  # one run a block, counted in the budget
    # Nothing is pending (`track status`): another pass boots nothing (the dead kernel is not tried again).
    [state] = tracker_states(store, [NAME], lambda _m: None)
    assert (state.tested, state.pending, state.last_tested) == (4, 0, shas[7])
    booted = len(staged)
    carry_on(store, NAME, steps)
    assert len(staged) == booted and store.open_kexec_boot(local.machine_id(root)) is None


def test_a_kexec_tracker_on_a_machine_that_did_not_opt_in_is_one_line_and_opens_no_store(
        lab: dict[str, object]) -> None:
    tmp = Path(str(lab["tmp"]))
    proc = perfline(tmp, "track", "run", "--once", str(tmp / "tracker.yaml"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
    assert "perfline kernels allow-kexec" in proc.stderr
    assert not (tmp / "db").exists()
    # Opted in, without the resume unit: the same, naming the unit.
    machine_settings.allow_kexec()
    proc = perfline(tmp, "track", "run", "--once", str(tmp / "tracker.yaml"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "perfline kernels install-resume" in proc.stderr and not (tmp / "db").exists()


def test_a_kexec_job_in_a_tracker_that_builds_no_kernel_is_refused_at_its_line(lab: dict[str, object]) -> None:
    tmp = Path(str(lab["tmp"]))
    text = (tmp / "tracker.yaml").read_text().replace("build:\n  kernel:\n    config: my.config\n", "build: make\n")
    (tmp / "tracker.yaml").write_text(text)
    proc = perfline(tmp, "track", "run", "--once", str(tmp / "tracker.yaml"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{tmp / 'tracker.yaml'}:" in proc.stderr and "build: {kernel: {config: FILE}}" in proc.stderr
    assert not (tmp / "db").exists()



@pytest.mark.parametrize("failing_tries", [1, 2])
def test_a_confirmation_whose_block_did_not_boot_is_tried_once_more(lab: dict[str, object],
                                                                    failing_tries: int) -> None:
    """A confirmation's boot that resets the machine (a kernel that booted when it was
    tested) fails its ab; the record's confirmation starts again once. Failed twice, the
    record stays `new` and the pass says both series' failures; nothing boots again."""
    store, tmp, root, shas, steps, staged, first = first_pass(lab)
    failed: list[int] = []

    def resets(boot: KexecBoot) -> bool:
        if shas[DEAD][:12] in boot.kernel:
            return True
        series = store.kexec_series(boot.series_id) if boot.series_id is not None else None
        if series is not None and series.kind == "ab" and boot.series_step == 0 and len(failed) < failing_tries:
            failed.append(series.id)
            return True
        return False

    boot_until_done(store, tmp, root, steps, first, resets)
    [regression] = [r for r in store.regressions(tracker=NAME) if r.kind == "regression"]
    tries = sorted(store.kexec_series_all_for("ab", "regression", regression.id), key=lambda one: one.id)
    good, bad = f"track-{NAME}-{shas[4][:12]}", f"track-{NAME}-{shas[6][:12]}"
    if failing_tries == 1:
        assert [one.state for one in tries] == ["failed", "done"] and failed == [tries[0].id]
        assert staged[5:12] == [good, good, bad, bad, good, good, bad]  # the failed block, then AB BA AB
        assert regression.status == "bisected" and regression.culprit == shas[CULPRIT], regression
        assert len(store.find_runs(label=f"confirm-{regression.id}")) == 6
        # Reopened by hand (fixed, then new): the next pass confirms it afresh over boots
        # instead of judging it again from the ab that ended it.
        transition(store, regression.id, "fixed")
        transition(store, regression.id, "new")
        assert store.kexec_series_for("ab", "regression", regression.id) is None
        booted = len(staged)
        with pytest.raises(MachineBooting):
            a_pass(store, tmp, steps)
        assert staged[booted:] == [good]
        [fresh] = store.kexec_series_all_for("ab", "regression", regression.id)
        assert fresh.state == "open" and fresh.id > tries[-1].id
    else:
        assert [one.state for one in tries] == ["failed", "failed"] and failed == [one.id for one in tries]
        assert staged[5:] == [good, good]
        assert regression.status == "new"
        said: list[str] = []
        booted = len(staged)
        a_pass(store, tmp, steps, said.append)
        assert len(staged) == booted and store.open_kexec_boot(local.machine_id(root)) is None
        assert any(f"tried 2 times: series {tries[0].id} failed" in line for line in said), said
