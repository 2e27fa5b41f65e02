"""The perf-profile monitor on real CPU work, its storage, and the diff of two profiles."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from perfline.monitors import DEFAULT_MONITORS, MONITORS, ProfilingMonitor
from perfline.monitors.perf_profile import PerfProfile
from perfline.monitors.perf_report import (
    FREQUENCY_HZ,
    RECORD_OPTIONS,
    REPORT_OPTIONS,
    UNKNOWN,
    ReportRow,
    Tally,
    kernel_addresses_visible,
    parse_report,
    summarize,
)
from perfline.monitors.perf_tool import PerfSession, find_perf
from perfline.records.job import Case
from perfline.records.profile import Profile, ProfileEntry, Symbol
from perfline.stats.profile_diff import Shift, profile_diff, shares
from perfline.store import Store
from perfline.targets import local

DATA = Path(__file__).with_name("data")
WORK_S = 0.5
# Hashing zeros: user time in sha256sum (stripped, so its symbols are addresses) and
# kernel time in head's reads of /dev/zero and the pipe. perf-profile samples every CPU:
# at nice -20 (root) the pipeline has a CPU whatever else runs at nice 0, so its share of
# the busy samples does not shrink with the machine's load (at nice 0 and a load of 7,
# sha256sum gained 12-19% of them and another program's loop 2-7%).
HASH_ZEROS = "nice -n -20 sh -c 'head -c 150000000 /dev/zero | sha256sum >/dev/null'"
CASE = Case(
    job="command", benchmark="command", params={}, tunables={}, repeat=2, warmup=0,
    monitors=("perf-profile",), target="local",
)  # fmt: skip


def hash_zeros() -> None:
    deadline = time.monotonic() + WORK_S
    while time.monotonic() < deadline:
        subprocess.run(HASH_ZEROS, shell=True, check=True)


def profiled(work: Callable[[], None]) -> tuple[dict[str, float], list[ProfileEntry]]:
    monitor = PerfProfile()
    monitor.check()
    monitor.start()
    try:
        work()
        measured = monitor.stop()
    finally:
        monitor.close()
    assert {m.metric for m in measured} <= set(PerfProfile.metrics)
    return {m.metric.name: m.value for m in measured}, list(monitor.profile().symbols)


def test_real_workload_is_in_the_profile() -> None:
    measured, entries = profiled(hash_zeros)
    # ~1 sample per busy CPU-millisecond: the workload alone keeps one CPU busy.
    assert measured["perf-profile.samples"] > 0.5 * WORK_S * 999 * 0.5
    assert 0 < measured["perf-profile.kernel_pct"] < 100
    assert 0 < len(entries) <= 30
    assert all(0 < e.share_pct <= 100 for e in entries)
    assert sum(e.share_pct for e in entries) <= 100 + 1e-9
    assert [e.share_pct for e in entries] == sorted((e.share_pct for e in entries), reverse=True)
    assert any(e.dso == "sha256sum" and not e.kernel for e in entries)
    kernel = [e for e in entries if e.kernel]
    assert kernel and all(e.dso == "[kernel.kallsyms]" for e in kernel)
    assert any(e.symbol != UNKNOWN for e in kernel)  # kernel symbols are resolved


def test_call_graphs_are_recorded_and_shares_are_self_time() -> None:
    """`perf record -g`, read back with every sample counted once, for the function it
    was in: with call graphs, perf report's default adds each function's callees to it."""
    PerfProfile().check()
    perf = find_perf("perf-profile")
    session = PerfSession(perf, "record", [*RECORD_OPTIONS, "-F", str(FREQUENCY_HZ)])

    def read(*args: str) -> str:
        return subprocess.run(
            [perf, *args, "-i", str(session.output)], capture_output=True, text=True, check=True
        ).stdout

    try:
        session.command("enable")
        hash_zeros()
        session.command("disable")
        session.finish()
        assert "CALLCHAIN" in read("evlist", "-v")
        samples = [line for line in read("script", "-F", "pid").splitlines() if line.strip()]
        rows = parse_report(read("report", *REPORT_OPTIONS))
    finally:
        session.close()
    assert len(samples) > 0.5 * WORK_S * FREQUENCY_HZ * 0.5
    assert sum(row.samples for row in rows) == len(samples)


def test_registered_but_not_a_default() -> None:
    assert issubclass(MONITORS.get("perf-profile"), ProfilingMonitor)
    assert "perf-profile" not in DEFAULT_MONITORS


def test_stop_without_start() -> None:
    with pytest.raises(RuntimeError, match="without start"):
        PerfProfile().stop()


def test_parse_captured_report() -> None:
    rows = parse_report((DATA / "perf_report_pid_sym_dso.txt").read_text())
    assert len(rows) == 14
    assert rows[0] == ReportRow(0, 480, "pv_native_safe_halt", "[kernel.kallsyms]", True)
    assert rows[1] == ReportRow(23786, 207, "gc_collect_main", "libpython3.11.so.1.0", False)
    assert rows[5] == ReportRow(23802, 12, UNKNOWN, "sha256sum", False)


def test_summary_leaves_out_idle_and_folds_unnamed_addresses() -> None:
    rows = parse_report((DATA / "perf_report_pid_sym_dso.txt").read_text())
    profile = summarize(rows, {0}, top=4)
    total = 207 + 49 + 26 + 17 + 12 + 5 + 4 + 4 + 3 + 3 + 2 + 2
    assert profile == Tally(
        samples=total,
        kernel_samples=5 + 4 + 4 + 2,
        profile=Profile((
            ProfileEntry("gc_collect_main", "libpython3.11.so.1.0", False, 100 * 207 / total),
            ProfileEntry("visit_decref", "libpython3.11.so.1.0", False, 100 * 49 / total),
            # the same symbol in two processes is one entry
            ProfileEntry(
                "_PyEval_EvalFrameDefault", "libpython3.11.so.1.0", False, 100 * 43 / total
            ),
            ProfileEntry(UNKNOWN, "sha256sum", False, 100 * (12 + 3 + 3 + 2) / total),
        )),  # a report read without call graphs has no chains
    )
    without_python = summarize(rows, {0, 23786, 23813}, top=30)
    assert without_python.samples == 12 + 5 + 4 + 4 + 3 + 3 + 2 + 2


def test_kernel_addresses_visible() -> None:
    assert kernel_addresses_visible(["ffffffff81000000 T _stext"])
    assert not kernel_addresses_visible(["0000000000000000 T _stext"])  # kptr_restrict
    assert not kernel_addresses_visible([])
    # 6.12 begins with per-CPU symbols at 0 for everyone: the first function's address tells.
    assert kernel_addresses_visible(["0000000000000000 A fixed_percpu_data", "0000000000001000 A cpu_debug_store",
                                     "ffffffff9a000000 T startup_64"])
    assert not kernel_addresses_visible(["0000000000000000 A fixed_percpu_data", "0000000000000000 T startup_64"])


def entry(symbol: str, share: float, dso: str = "[kernel.kallsyms]") -> ProfileEntry:
    return ProfileEntry(symbol, dso, dso.startswith("[kernel"), share)


def test_store_averages_repetitions_and_counts_missing_symbols_as_zero(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    run_id = store.start_run(CASE, local.fingerprint(), pid=1)
    other_run = store.start_run(CASE, local.fingerprint(), pid=1)
    store.add_profile(run_id, 0, Profile((entry("copy_page", 30.0), entry("memcpy", 10.0, "libc.so.6"))))
    store.add_profile(run_id, 1, Profile((entry("copy_page", 20.0), entry("schedule", 8.0))))
    store.add_profile(other_run, 0, Profile((entry("schedule", 99.0),)))
    store.close()

    reopened = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert reopened.profile(run_id) == [
        entry("copy_page", 25.0),
        entry("memcpy", 5.0, "libc.so.6"),
        entry("schedule", 4.0),
    ]
    assert reopened.profile(other_run + 1) == []


def test_diff_orders_by_absolute_change() -> None:
    base = [entry("copy_page", 50.0), entry("schedule", 20.0), entry("memcpy", 10.0, "libc.so.6")]
    other = [entry("copy_page", 40.0), entry("schedule", 25.0), entry("clear_page", 15.0)]
    shifts = profile_diff(shares(base), shares(other), top=3)
    assert shifts == [
        Shift(Symbol("clear_page", "[kernel.kallsyms]", True), 0.0, 15.0, 15.0),
        Shift(Symbol("copy_page", "[kernel.kallsyms]", True), 50.0, 40.0, -10.0),
        Shift(Symbol("memcpy", "libc.so.6", False), 10.0, 0.0, -10.0),
    ]
    assert profile_diff(shares(base), shares(base), top=1)[0].delta_pct == 0.0


def test_diff_of_real_profiles_finds_the_workload() -> None:
    _, quiet = profiled(lambda: time.sleep(WORK_S))
    _, busy = profiled(hash_zeros)
    # The largest gain, not the largest shift: a quiet profile can be all one background
    # kernel thread (DAMON's kdamond here, 100% of a sleep's samples), whose drop to 0%
    # is then the largest shift of all.
    gained = max(profile_diff(shares(quiet), shares(busy), top=10), key=lambda shift: shift.delta_pct)
    assert gained.key.dso == "sha256sum" and gained.delta_pct > 0


def test_runner_stores_the_profile_of_each_repetition(tmp_path: Path) -> None:
    db = tmp_path / "perfline.db"
    proc = subprocess.run(
        [
            sys.executable, "-m", "perfline", "--db", str(db), "run", "command",
            "-p", f"cmd={HASH_ZEROS}; echo 1", "--repeat", "2", "--warmup", "0",
            "--monitor", "perf-profile", "--json",
        ],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    [run] = json.loads(proc.stdout)
    assert run["summary"]["perf-profile.samples"]["n"] == 2
    store = Store.open(f"sqlite:///{db}")
    profile = store.profile(run["id"])
    assert any(e.dso == "sha256sum" for e in profile)
