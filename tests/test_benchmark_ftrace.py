"""ftrace-switch against the real tracefs: runs, refusals, and the state it must restore."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from perfline.benchmarks import BENCHMARKS, BenchmarkFailed, BenchmarkUnavailable
from perfline.benchmarks.base import CommandOutput
from perfline.benchmarks.ftrace_switch import FtraceSwitch, parse_tracers
from perfline.benchmarks.tracefs import SECURITYFS, TRACEFS, lockdown_mode
from perfline.system.journal import own_journal
from perfline.system.kernel_state import KernelState, is_mounted

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="tracefs is writable only by root")

TracefsState = Callable[[], tuple[str, str]]


@pytest.fixture
def available() -> list[str]:
    with KernelState(own_journal()).mounted("tracefs", TRACEFS):
        return (TRACEFS / "available_tracers").read_text().split()


@pytest.fixture
def cycle(available: list[str]) -> str:
    """A tracer cycle the kernel allows even under lockdown."""
    return "blk,nop" if "blk" in available else "nop,nop"


@pytest.fixture
def tracefs_state(available: list[str]) -> Iterator[TracefsState]:
    """tracefs mounted, with a start state no tracer cycle ends in; the system's own restored.

    Starting from blk (when the kernel has it) and tracing_on=1 makes a missing restore
    visible: every cycle ends with tracing_on=0, and the refusal tests set nop first.
    """
    with KernelState(own_journal()).mounted("tracefs", TRACEFS):

        def state() -> tuple[str, str]:
            return (
                (TRACEFS / "current_tracer").read_text().strip(),
                (TRACEFS / "tracing_on").read_text().strip(),
            )

        original = state()
        try:
            (TRACEFS / "current_tracer").write_text("blk" if "blk" in available else original[0])
            (TRACEFS / "tracing_on").write_text("1")
            yield state
        finally:
            (TRACEFS / "current_tracer").write_text(original[0])
            (TRACEFS / "tracing_on").write_text(original[1])


def test_registered() -> None:
    assert BENCHMARKS.get("ftrace-switch") is FtraceSwitch


def test_parse_tracers() -> None:
    assert parse_tracers("function,nop") == ["function", "nop"]
    assert parse_tracers(" blk , nop,") == ["blk", "nop"]
    assert parse_tracers("nop,nop") == ["nop", "nop"]


def test_lockdown_mode() -> None:
    # /sys/kernel/security/lockdown as read on the development VM.
    assert lockdown_mode("none [integrity] confidentiality\n") == "integrity"
    assert lockdown_mode("[none] integrity confidentiality\n") == "none"
    assert lockdown_mode("") is None


def test_not_root_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(BenchmarkUnavailable, match="root"):
        with FtraceSwitch({}, tmp_path):
            pass


@needs_root
def test_allowed_tracers_run_and_state_is_restored(
    tmp_path: Path, cycle: str, tracefs_state: TracefsState
) -> None:
    before = tracefs_state()
    with FtraceSwitch({"iterations": 3, "tracers": cycle}, tmp_path) as bench:
        measurements = bench.run_once() + bench.run_once()
        settings = bench.settings()
    assert [m.metric.name for m in measurements] == ["ftrace-switch.seconds"] * 2
    assert all(math.isfinite(m.value) and m.value > 0 for m in measurements)
    assert settings == {"tracefs": str(TRACEFS), "tracefs_mounted_by_perfline": False}
    assert tracefs_state() == before


@needs_root
@pytest.mark.parametrize("tracers", ["function,nop", "nop,function"])
def test_function_tracer_refused_clearly_or_run(
    tmp_path: Path, tracers: str, tracefs_state: TracefsState
) -> None:
    """Kernels under lockdown (the development VM) refuse `function` with EPERM.

    "nop,function" has set nop before the refusal, so the restore is exercised too.
    """
    before = tracefs_state()
    try:
        with FtraceSwitch({"iterations": 2, "tracers": tracers}, tmp_path) as bench:
            measurements = bench.run_once()
    except BenchmarkUnavailable as exc:
        message = str(exc)
        assert "EPERM" in message and "lockdown" in message, message
        suggested = message.split("tracers: ")[1].split("`")[0]
        assert "function" not in suggested
        assert "ftrace-events" in message
    else:
        assert measurements[0].value > 0
    assert tracefs_state() == before


@needs_root
def test_tracer_the_kernel_lacks_is_unavailable(
    tmp_path: Path, available: list[str], tracefs_state: TracefsState
) -> None:
    before = tracefs_state()
    with pytest.raises(BenchmarkUnavailable, match="no-such-tracer not in available_tracers"):
        with FtraceSwitch({"tracers": "nop,no-such-tracer"}, tmp_path):
            pass
    assert tracefs_state() == before


@needs_root
@pytest.mark.parametrize("tracers", ["function,nop", "nop,nop"])
def test_tracefs_mounted_only_for_the_run(tmp_path: Path, tracers: str) -> None:
    """perfline mounts tracefs (and securityfs, to name the lockdown) only when it must."""
    tracefs_before = is_mounted("tracefs", TRACEFS)
    securityfs_before = is_mounted("securityfs", SECURITYFS)
    try:
        with FtraceSwitch({"iterations": 1, "tracers": tracers}, tmp_path) as bench:
            bench.run_once()
            assert bench.settings()["tracefs_mounted_by_perfline"] is not tracefs_before
    except BenchmarkUnavailable as exc:
        assert "EPERM" in str(exc)
    assert is_mounted("tracefs", TRACEFS) is tracefs_before
    assert is_mounted("securityfs", SECURITYFS) is securityfs_before


# -- the loop itself, and its hand-off to a VM guest (no tracefs needed) ----------------


def fake_tracefs(root: Path) -> Path:
    """A directory with the files the loop writes, each holding a value no cycle ends in."""
    root.mkdir()
    (root / "current_tracer").write_text("blk\n")
    (root / "tracing_on").write_text("1\n")
    return root


def in_guest(bench: FtraceSwitch, where: Path, listing: str, mounted: bool = True) -> None:
    """What GuestBenchmark does after boot: the guest set-up's output handed over."""
    first = f"{where} mounted" if mounted else str(where)
    bench.guest_ready(CommandOutput(f"{first}\n{listing}\n", "", 0.1))


def test_guest_set_up_checks_the_guests_tracers_and_the_loop_writes_in_the_seeds_order(tmp_path: Path) -> None:
    """The guest's listing decides, and the loop is the seed's: the last writes are
    `nop`, then tracing_on 1, then 0 (run here by /bin/sh on a directory of plain files)."""
    tracefs = fake_tracefs(tmp_path / "tracing")
    bench = FtraceSwitch({"iterations": 2, "tracers": "function,nop"}, tmp_path)
    assert bench.guest_setup().argv[-1] == "available_tracers"
    assert bench.executables() == []  # the guest's own shell runs the loop
    in_guest(bench, tracefs, "blk function nop")
    assert bench.guest_settings() == {"tracefs": str(tracefs), "tracefs_mounted_by_perfline": True}
    [seconds] = bench.parse(bench.run_here(bench.guest_argv(), bench.timeout()))
    assert seconds.metric.name == "ftrace-switch.seconds" and seconds.value > 0
    assert (tracefs / "current_tracer").read_text() == "nop\n"
    assert (tracefs / "tracing_on").read_text() == "0\n"
    # A tracer the guest's kernel lacks is named before any repetition, as on a host.
    with pytest.raises(BenchmarkUnavailable, match="function not in available_tracers"):
        in_guest(FtraceSwitch({"tracers": "function,nop"}, tmp_path), tracefs, "blk nop", mounted=False)


def test_a_refused_write_stops_the_loop_with_the_shells_message(tmp_path: Path) -> None:
    tracefs = fake_tracefs(tmp_path / "tracing")
    (tracefs / "current_tracer").unlink()
    (tracefs / "current_tracer").mkdir()  # a write to it fails, as a refused one does
    bench = FtraceSwitch({"iterations": 3, "tracers": "function,nop"}, tmp_path)
    in_guest(bench, tracefs, "function nop")
    with pytest.raises(BenchmarkFailed, match="ftrace-switch: writing to tracefs failed") as info:
        bench.run_once()
    assert "current_tracer" in info.value.output_tail
    assert (tracefs / "tracing_on").read_text() == "1\n"  # stopped at the first write
