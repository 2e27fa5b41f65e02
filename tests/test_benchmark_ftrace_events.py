"""ftrace-events against the real tracefs: runs, unknown events, and the state it restores."""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from perfline.benchmarks import BENCHMARKS, BenchmarkUnavailable
from perfline.benchmarks.ftrace_events import (
    FtraceEvents,
    event_path,
    parse_available_events,
)
from perfline.benchmarks.tracefs import TRACEFS
from perfline.system.journal import own_journal
from perfline.system.kernel_state import KernelState, is_mounted, read_restorable

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="tracefs is writable only by root")

EVENT = "sched/sched_switch"
ENABLE = f"events/{EVENT}/enable"

TracefsState = Callable[[], tuple[str, str]]


@pytest.fixture
def tracefs_state() -> Iterator[TracefsState]:
    """tracefs mounted, the event and tracing_on at 1, the system's own state restored after.

    Every enable/disable cycle ends with both at 0, so starting from 1 makes a missing
    restore visible.
    """
    with KernelState(own_journal()).mounted("tracefs", TRACEFS):

        def state() -> tuple[str, str]:
            return (
                (TRACEFS / ENABLE).read_text().strip(),
                (TRACEFS / "tracing_on").read_text().strip(),
            )

        original = state()
        try:
            (TRACEFS / ENABLE).write_text("1")
            (TRACEFS / "tracing_on").write_text("1")
            yield state
        finally:
            (TRACEFS / ENABLE).write_text(original[0].rstrip("*"))
            (TRACEFS / "tracing_on").write_text(original[1])


def test_registered() -> None:
    assert BENCHMARKS.get("ftrace-events") is FtraceEvents


def test_event_names() -> None:
    assert event_path("sched/sched_switch") == "sched/sched_switch"
    assert event_path(" sched:sched_switch ") == "sched/sched_switch"
    assert parse_available_events("sched:sched_switch\nirq:irq_handler_entry\n\n") == [
        "sched/sched_switch",
        "irq/irq_handler_entry",
    ]


def test_soft_mode_marker_is_not_written_back(tmp_path: Path) -> None:
    for text, restored in (("1*\n", "1"), ("0\n", "0"), ("always [madvise] never\n", "madvise")):
        (tmp_path / "enable").write_text(text)
        assert read_restorable(tmp_path / "enable") == restored


def test_not_root_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(BenchmarkUnavailable, match="root"):
        with FtraceEvents({}, tmp_path):
            pass


def test_refusal_names_the_errno_and_lockdown(tmp_path: Path) -> None:
    """The message a kernel under lockdown confidentiality would give when enabling."""
    message = FtraceEvents({}, tmp_path).refused("1", PermissionError(errno.EPERM, "denied"))
    assert message.startswith(f"the kernel refused enabling the {EVENT} event (EPERM;")
    assert "kernel lockdown: " in message


@needs_root
def test_runs_and_state_is_restored(tmp_path: Path, tracefs_state: TracefsState) -> None:
    before = tracefs_state()
    with FtraceEvents({"iterations": 5}, tmp_path) as bench:
        measurements = bench.run_once() + bench.run_once()
        settings = bench.settings()
    assert [m.metric.name for m in measurements] == ["ftrace-events.seconds"] * 2
    assert all(math.isfinite(m.value) and m.value > 0 for m in measurements)
    assert settings == {
        "tracefs": str(TRACEFS),
        "tracefs_mounted_by_perfline": False,
        "event": EVENT,
    }
    assert tracefs_state() == before


@needs_root
def test_unknown_event_is_unavailable_with_suggestion(
    tmp_path: Path, tracefs_state: TracefsState
) -> None:
    before = tracefs_state()
    with pytest.raises(BenchmarkUnavailable) as raised:
        with FtraceEvents({"event": "sched:sched_swich"}, tmp_path):
            pass
    message = str(raised.value)
    assert "unknown trace event 'sched/sched_swich'" in message
    assert "did you mean sched/sched_switch" in message
    assert tracefs_state() == before


@needs_root
def test_tracefs_mounted_only_for_the_run(tmp_path: Path) -> None:
    mounted_before = is_mounted("tracefs", TRACEFS)
    with FtraceEvents({"iterations": 1}, tmp_path) as bench:
        bench.run_once()
        assert bench.settings()["tracefs_mounted_by_perfline"] is not mounted_before
    assert is_mounted("tracefs", TRACEFS) is mounted_before
