"""The ftrace benchmarks in a VM guest for real: the seed's function <-> nop loop, which
this host's lockdown refuses, on Debian's cloud kernels under QEMU (TCG here).

Slow: a guest switching to the function tracer patches every traced function under
emulation, seconds per switch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_qemu_target import run_json

from perfline.targets.kernels import Kernel

pytestmark = [pytest.mark.slow, pytest.mark.vm]

FQS = "/sys/module/rcutree/parameters/jiffies_till_first_fqs"


def test_ftrace_switch_runs_the_seeds_loop_in_the_guest(debian_kernels: dict[str, Kernel], tmp_path: Path) -> None:
    run = run_json(
        tmp_path / "db", "ftrace-switch", "-p", "iterations=1", "-p", "tracers=function,nop", "--repeat", "2",
        "--target", "qemu", "--kernel", "debian-6.12", "--accel", "tcg",
        "--cmdline", "rcutree.jiffies_till_first_fqs=0",
    )  # fmt: skip
    assert run["status"] == "completed", (run["error"], run["output_tail"])
    seconds = [s["value"] for s in run["samples"] if s["metric"] == "ftrace-switch.seconds"]
    # Two switches to and from `function` under TCG: well above a request's own cost.
    assert len(seconds) == 2 and all(0.1 < value < 600 for value in seconds), seconds
    settings, fingerprint = run["settings"], run["fingerprint"]
    # The initramfs agent mounts proc, sys and dev only: the guest set-up mounted tracefs.
    assert (settings["tracefs"], settings["tracefs_mounted_by_perfline"]) == ("/sys/kernel/tracing", True)
    assert settings["vm_kernel"] == "debian-6.12"
    assert fingerprint["kernel_release"] == debian_kernels["debian-6.12"].release
    assert "rcutree.jiffies_till_first_fqs=0" in fingerprint["cmdline"]
    assert fingerprint["sysfs"][FQS] == "0"


def test_ftrace_benchmarks_check_the_guests_kernel(debian_kernels: dict[str, Kernel], tmp_path: Path) -> None:
    """A tracer the guest's kernel lacks fails the run before any repetition, naming the
    guest's tracers; ftrace-events runs in a guest too, from the same loop."""
    db = tmp_path / "db"
    missing = run_json(
        db, "ftrace-switch", "-p", "tracers=nop,no-such-tracer", "--repeat", "1",
        "--target", "qemu", "--kernel", "debian-6.1", "--accel", "tcg", check=False,
    )  # fmt: skip
    assert missing["status"] == "failed" and missing["samples"] == []
    assert "no-such-tracer not in available_tracers" in missing["error"]
    assert "function" in missing["error"]  # the guest's list, which lockdown does not shorten
    events = run_json(
        db, "ftrace-events", "-p", "iterations=3", "--repeat", "2",
        "--target", "qemu", "--kernel", "debian-6.1", "--accel", "tcg",
    )  # fmt: skip
    assert events["status"] == "completed", (events["error"], events["output_tail"])
    assert len([s for s in events["samples"] if s["metric"] == "ftrace-events.seconds"]) == 2
    assert events["settings"]["event"] == "sched/sched_switch"
    assert events["fingerprint"]["kernel_release"] == debian_kernels["debian-6.1"].release
