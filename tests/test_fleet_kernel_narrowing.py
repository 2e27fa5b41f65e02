"""A kernel tracker on the fleet with `narrow: true`: the change it finds is confirmed and
bisected on one lab machine of its class, over that machine's boots.

As in test_fleet_kernels.py: a real tracker process and PostgreSQL, the worker's own
loop and `perfline resume`'s own code in this process, up to the kexec call; the boot is
the edge (the machine is a tree of /proc and /etc files that the test "boots" into the
release each boot staged). The tree is test_kernel_bisect's stand-in, whose `make
bzImage` gives each commit an image naming its release; the job's value depends on the
release that "runs" (1.0 on the old one, 1.3 from the culprit on), with 0.5% noise.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from perfline.builds import kernel
from perfline.cli.kexec import go_on, resume_here
from perfline.fleet.kernel_narrowing import KINDS
from perfline.fleet.machine import describe
from perfline.fleet.queue import FleetQueue
from perfline.fleet.stalled import take_back_stalled
from perfline.fleet.worker import FleetWorker, WorkerSettings
from perfline.runner import kexec_resume
from perfline.store import Store
from perfline.system.pgserver import PrivateServer
from perfline.targets import kernels, local, machine_settings
from perfline.track.status import tracker_states
from test_fleet_kernels import CLASS, VERSION_61, boots_into
from test_kernel_bisect import fake_bzimage, kernel_tree
from test_kexec_target import DEFAULT_CMDLINE, RELEASE_61
from test_kexec_track import JOB as KEXEC_JOB
from test_kexec_track import TRACKER as KEXEC_TRACKER

pytestmark = pytest.mark.postgres

OLD, NEW = "6.1.0-test", "6.12.0-test"
COMMITS, CULPRIT = 5, 3  # every 2nd commit tested (0, 2, 4): the step lies between 2 and 4
# test_kexec_track's tracker and job, on the fleet: the job of target local (a machine of
# the class boots each build).
TRACKER = KEXEC_TRACKER + f"fleet:\n  class: {CLASS}\n"
JOB = "".join(line for line in KEXEC_JOB.splitlines(keepends=True) if not line.startswith(("target:", "kernel:")))

def test_a_kernel_tracker_on_the_fleet_confirms_and_bisects_its_change_over_one_machines_boots(
    tmp_path: Path, postgres_server: PrivateServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = postgres_server.create_database(f"fleet_narrow_{tmp_path.name[-24:].replace('-', '_')}")
    monkeypatch.setenv("PERFLINE_DB", url)
    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(machine_settings.SETTINGS_ENV, str(tmp_path / "machine.yaml"))
    machine_settings.allow_kexec()
    (tmp_path / "resume.service").write_text("[Unit]\n")
    machine_settings.set_resume_unit(tmp_path / "resume.service")
    old, new = fake_bzimage(tmp_path / "old.img", OLD), fake_bzimage(tmp_path / "new.img", NEW)
    shas = kernel_tree(tmp_path / "linux", [old if i < CULPRIT else new for i in range(COMMITS)])
    # Built without module support: the commits' kernels boot without an initramfs.
    (tmp_path / "my.config").write_text("# CONFIG_MODULES is not set\n")
    value = tmp_path / "value"
    (tmp_path / "job.yaml").write_text(JOB.format(python=sys.executable, value=value))
    (tmp_path / "tracker.yaml").write_text(TRACKER.format(since=shas[0]))
    root = tmp_path / "machine"
    boots_into(root, RELEASE_61, VERSION_61, DEFAULT_CMDLINE, "boot-0")
    staged: list[str] = []
    steps = kexec_resume.BootSteps(root=root, stage=lambda image, _line: staged.append(image.name),
                                   boot=lambda: None)
    env = {**os.environ, "PERFLINE_DB": url, kernels.CACHE_ENV: str(tmp_path / "tracker-cache")}
    with (tmp_path / "track.log").open("w") as log:
        tracking = subprocess.Popen([sys.executable, "-m", "perfline", "track", "run", str(tmp_path / "tracker.yaml"),
                                     "--once"], env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    store = Store.open(url)
    said: list[str] = []
    machine_id = local.machine_id(root)
    boots = 0
    try:
        with FleetQueue(url) as queue:
            def worker() -> FleetWorker:
                return FleetWorker(store, queue, describe("lab1", CLASS), WorkerSettings(stalled_s=3.0, poll_s=0.2),
                                   said.append, images=tmp_path / "images", boot_steps=steps)

            def drain_when_done() -> None:
                """The tracker's pass over (or stuck past its time): the machine stops taking work."""
                try:
                    tracking.wait(timeout=300)
                except subprocess.TimeoutExpired:
                    tracking.kill()
                store.set_hold("lab1", "drain")

            threading.Thread(target=drain_when_done, daemon=True).start()
            while "drained" not in (why := worker().serve()):
                assert why.startswith("kexec boot") and "booting" in why, said[-5:]
                boots += 1
                boot = store.open_kexec_boot(machine_id)
                assert boot is not None and boot.fleet_attempt is not None
                # Booting, or between its boots: the sweep leaves the machine's job alone.
                assert take_back_stalled(store, queue, 0.0) == []
                boots_into(root, boot.release, boot.banner.split(") ", 1)[1], boot.cmdline, f"boot-{boots}a")
                value.write_text("1.0\n" if boot.release == OLD else "1.3\n")
                assert resume_here(store, root).outcome == "measured"
                boots_into(root, RELEASE_61, VERSION_61, DEFAULT_CMDLINE, f"boot-{boots}b")
                back = resume_here(store, root)
                assert back.outcome == "returned" and back.boot is not None
                if back.boot.series_id is not None:  # what `perfline resume` does next: nothing for a fleet job
                    go_on(store, back.boot, steps)
                assert store.open_kexec_boot(machine_id) is None
                assert take_back_stalled(store, queue, 0.0) == []
            jobs = queue.jobs()
        assert tracking.wait(timeout=60) == 0, (tmp_path / "track.log").read_text()
    finally:
        if tracking.poll() is None:
            tracking.kill()
            tracking.wait()
    tracked = (tmp_path / "track.log").read_text()

    # The three tested commits, one boot each; then the confirmation, 3 boots a side
    # interleaved (AB BA AB); then the bisection's probes, one boot each; one machine.
    tested = [shas[i] for i in (0, 2, 4)]
    assert staged[:3] == [f"track-lab-{sha[:12]}" for sha in tested]
    good, bad = f"track-lab-{shas[2][:12]}", f"track-lab-{shas[4][:12]}"
    assert staged[3:9] == [good, bad, bad, good, good, bad]
    [regression] = [r for r in store.regressions(tracker="lab") if r.kind == "regression"]
    assert (regression.good, regression.bad) == (shas[2], shas[4])
    assert regression.status == "bisected" and regression.culprit == shas[CULPRIT], tracked
    probes = [name for name in staged if name.startswith(f"bisect-{regression.bisection_id}-")]
    assert probes and len(staged) == 9 + len(probes) == boots
    assert len(store.find_runs(label=f"confirm-{regression.id}")) == 6
    # Every kernel the machine booted is in the fleet's image directory: the tested commits'
    # (their kernel jobs built them), then taken from there for the confirmation and the
    # probes, and the probe commit no job had tested built by the bisection and put there.
    key = kernel.keep_config_bytes((tmp_path / "my.config").read_bytes()).stem
    assert sorted(p.name for p in (tmp_path / "images" / key).iterdir()) == sorted([*shas[:5:2], shas[CULPRIT]])
    assert f"{shas[2][:12]}: kernel taken from {tmp_path / 'images' / key / shas[2]}" in said
    # Judged by the confirmation over boots on the worker, the culprit recorded by the tracker.
    assert any(line.startswith(f"regression {regression.id}: confirmed") and "over kexec boots" in line
               for line in said), said
    assert f"regression {regression.id}: bisection {regression.bisection_id}: found, culprit {shas[CULPRIT][:12]}" \
        in tracked
    # Two narrowing jobs, each carried over its boots by one attempt on lab1, both succeeded.
    narrowing = [j for j in jobs if j.args.get("kind") in KINDS]
    assert [(j.args["kind"], j.status) for j in narrowing] == [("kernel-confirm", "succeeded"),
                                                                ("kernel-bisect", "succeeded")]
    attempts = store.attempts([j.id for j in narrowing])
    assert [(a.machine, a.state) for a in attempts] == [("lab1", "succeeded")] * 2
    series = {one.kind: one for one in store.kexec_series_list()}
    assert series.keys() == {"ab", "bisect"} and {one.state for one in series.values()} == {"done"}
    # The health job ran on the default kernel at every start of the worker: after every return.
    health = [r for r in store.list_runs(200) if r.label == "fleet-health"]
    assert len(health) == boots + 1
    [state] = tracker_states(store, ["lab"], lambda _m: None)  # `track status`
    assert (state.tested, state.pending, state.last_tested) == (3, 0, shas[4])
