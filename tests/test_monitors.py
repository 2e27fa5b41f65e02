"""The system monitors, started and stopped around real CPU work; parsers on captured text."""

from __future__ import annotations

import time

import pytest

from perfline.monitors import DEFAULT_MONITORS, MONITORS, Monitor
from perfline.monitors.perf_stat import SOFTWARE, parse_perf_csv
from perfline.monitors.perf_tool import effective_capabilities, system_wide_allowed
from perfline.monitors.proc_stat import parse_proc_stat
from perfline.monitors.vmstat import parse_key_values
from perfline.records.metric import Direction, Measurement

WORK_S = 0.3


def around_work(monitor: Monitor) -> dict[str, Measurement]:
    monitor.check()
    monitor.start()
    try:
        deadline = time.monotonic() + WORK_S
        while time.monotonic() < deadline:
            sum(i * i for i in range(1000))
        measured = monitor.stop()
    finally:
        monitor.close()
    return {m.metric.name: m for m in measured}


@pytest.mark.parametrize("name", DEFAULT_MONITORS)
def test_declared_metrics_are_neutral_and_cover_what_is_measured(name: str) -> None:
    cls = MONITORS.get(name)
    assert all(m.direction is Direction.NEUTRAL for m in cls.metrics)
    measured = around_work(cls())
    assert set(measured) <= {m.name for m in cls.metrics}


def test_proc_stat() -> None:
    measured = around_work(MONITORS.get("proc-stat")())
    shares = [m.value for name, m in measured.items() if name.endswith("_pct")]
    assert len(shares) == 6
    assert all(0 <= share <= 100 for share in shares)
    assert sum(shares) == pytest.approx(100)
    assert measured["proc-stat.user_pct"].value > 0  # this test kept a CPU busy
    for name in ("context_switches", "interrupts", "forks"):
        assert measured[f"proc-stat.{name}"].value >= 0


def test_vmstat() -> None:
    measured = around_work(MONITORS.get("vmstat")())
    assert measured["vmstat.mem_free"].value > 0
    assert measured["vmstat.page_cache"].value > 0
    for name in ("pgfault", "pgmajfault", "pswpin", "pswpout", "pgpgin", "pgpgout"):
        assert measured[f"vmstat.{name}"].value >= 0


def test_perf_stat_counts_software_events_without_hardware_counters() -> None:
    monitor = MONITORS.get("perf-stat")()
    monitor.check()
    monitor.start()
    try:
        touched = bytes(range(256)) * (200 << 10)  # 50 MiB written: thousands of page faults
        measured = {m.metric.name: m for m in monitor.stop()}
    finally:
        monitor.close()
    assert len(touched) == 50 << 20
    # This VM has no cycles/instructions counters; a machine with them reports those.
    if "perf-stat.cycles" in measured:
        assert measured["perf-stat.ipc"].value > 0
        return
    assert set(measured) == {c.metric.name for c in SOFTWARE}
    assert measured["perf-stat.page_faults"].value > 0  # around_work touches memory
    assert all(m.value >= 0 for m in measured.values())


def test_stop_without_start() -> None:
    for name in DEFAULT_MONITORS:
        with pytest.raises(RuntimeError, match="without start"):
            MONITORS.get(name)().stop()


PROC_STAT = """\
cpu  5810 7 2263 46593 2521 3 50 26 11 0
cpu0 1103 0 727 26691 135 0 4 10 0 0
intr 174335 0 0 13 0 57
ctxt 334833
btime 1795315646
processes 4805
procs_running 3
softirq 121527 0 10979 4 4845
"""


def test_parse_proc_stat() -> None:
    assert parse_proc_stat(PROC_STAT) == {
        "cpu_user": 5810,
        "cpu_nice": 7,
        "cpu_system": 2263,
        "cpu_idle": 46593,
        "cpu_iowait": 2521,
        "cpu_irq": 3,
        "cpu_softirq": 50,
        "cpu_steal": 26,
        "ctxt": 334833,
        "intr": 174335,
        "processes": 4805,
    }


def test_parse_meminfo_and_vmstat() -> None:
    meminfo = "MemTotal:       24684084 kB\nMemFree:        24335232 kB\nHugePages_Total:       0\n"
    assert parse_key_values(meminfo) == {
        "MemTotal": 24684084,
        "MemFree": 24335232,
        "HugePages_Total": 0,
    }
    assert parse_key_values("pgfault 1592991\npgmajfault 1219\n") == {
        "pgfault": 1592991,
        "pgmajfault": 1219,
    }


def test_parse_perf_csv() -> None:
    text = """\
# started on Sun Nov 22 02:52:13 2026

984.41,msec,task-clock,984411171,100.00,2.000,CPUs utilized
5301,,context-switches,984410400,100.00,5.385,K/sec
<not supported>,,cycles,0,100.00,,
<not counted>,,instructions,0,0.00,,
"""
    assert parse_perf_csv(text) == {"task-clock": 984.41, "context-switches": 5301.0}


def test_system_wide_permission() -> None:
    status = "Name:\tpython\nCapPrm:\t0000000000000000\nCapEff:\t0000000000200000\n"
    assert effective_capabilities(status) == 1 << 21
    assert system_wide_allowed(2, 1 << 21)  # CAP_SYS_ADMIN
    assert system_wide_allowed(2, 1 << 38)  # CAP_PERFMON
    assert system_wide_allowed(0, 0)
    assert not system_wide_allowed(1, 0)


def test_pace_reports_the_slowdown_around_the_work() -> None:
    from perfline.monitors.pace import SLOWDOWN, Pace

    assert SLOWDOWN.direction is Direction.NEUTRAL
    measured = around_work(Pace())
    # Against the median of the recent readings (system.speed): below 0 when the machine
    # ran faster than that, never a machine that stopped (-100%).
    assert set(measured) == {"pace.slowdown"} and measured["pace.slowdown"].value > -100.0
