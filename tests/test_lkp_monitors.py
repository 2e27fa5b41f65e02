"""The LKP-style monitors against workloads that move their metrics, through `perfline
run` (real /proc files, real processes), and their parsers on captured text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfline.monitors.base import MonitorUnavailable
from perfline.monitors.files import SystemFiles
from perfline.monitors.lkp import Interrupts, Schedstat
from perfline.monitors.proc_tables import disk_stats, net_dev, per_cpu_rows, per_cpu_table, pressure, schedstat
from perfline.system.cgroup import CgroupUnavailable, parent_group
from processes import dead_task_groups

PY = sys.executable


def run_with(tmp_path: Path, monitor: str, cmd: str, repeat: int = 2,
             wrapper: tuple[str, ...] = ()) -> tuple[dict[str, dict[str, float]], str]:
    proc = subprocess.run(
        [*wrapper, sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "run", "command", "-p",
         f"cmd={cmd}", "--repeat", str(repeat), "--warmup", "0", "--monitor", monitor, "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    [run] = json.loads(proc.stdout)
    assert run["status"] == "completed", run["error"]
    return run["summary"], proc.stderr


def mean(summary: dict[str, dict[str, float]], metric: str) -> float:
    return summary[metric]["mean"]


LOOPBACK = (
    "import socket, threading\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
    "def sink():\n"
    "    c, _ = s.accept()\n"
    "    while c.recv(1 << 16): pass\n"
    "t = threading.Thread(target=sink); t.start()\n"
    "c = socket.create_connection(s.getsockname())\n"
    "block = b'x' * (1 << 16)\n"
    "for _ in range(800): c.sendall(block)\n"
    "c.close(); t.join(); print(1)\n"
)


def test_netdev_and_softirqs_see_loopback_traffic(tmp_path: Path) -> None:
    script = tmp_path / "lo.py"
    script.write_text(LOOPBACK)
    summary, _ = run_with(tmp_path, "netdev", f"{PY} {script}")
    # 50 MiB over lo within the repetition: counted once received and once sent.
    assert mean(summary, "netdev.rx_bytes") > 5e6 and mean(summary, "netdev.tx_bytes") > 5e6
    summary, _ = run_with(tmp_path, "softirqs", f"{PY} {script}")
    assert mean(summary, "softirqs.net_rx") > 0 and mean(summary, "softirqs.timer") > 0


def test_diskstats_sees_direct_writes(tmp_path: Path) -> None:
    target = tmp_path / "data"
    summary, _ = run_with(tmp_path, "diskstats",
                          f"dd if=/dev/zero of={target} bs=1M count=64 oflag=direct status=none; echo 1")
    assert mean(summary, "diskstats.write_kib") > 1000 and mean(summary, "diskstats.writes") > 1


def test_meminfo_sees_shared_memory_kept(tmp_path: Path) -> None:
    shm = Path("/dev/shm") / f"perfline-test-{os.getpid()}"
    try:
        summary, _ = run_with(tmp_path, "meminfo",
                              f"dd if=/dev/zero of={shm} bs=1M count=200 status=none; echo 1", repeat=1)
        before_mib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                               if line.startswith("Shmem:"))) / 1024
    finally:
        shm.unlink(missing_ok=True)
    # At the end of the repetition the 200 MiB file was there; it still is when read above.
    assert mean(summary, "meminfo.shmem") > 150 and abs(mean(summary, "meminfo.shmem") - before_mib) < 50


def test_psi_sees_cpu_pressure(tmp_path: Path) -> None:
    if not Path("/proc/pressure/cpu").exists():
        pytest.skip("kernel without PSI")
    cpus = len(os.sched_getaffinity(0))
    hogs = " & ".join(["timeout 1 sh -c 'while :; do :; done'"] * (2 * cpus))
    summary, _ = run_with(tmp_path, "psi", f"{hogs}; wait; echo 1")
    assert mean(summary, "psi.cpu_some_pct") > 10


def test_interrupts_count_timer_ticks(tmp_path: Path) -> None:
    summary, _ = run_with(tmp_path, "interrupts", "sleep 0.3; echo 1")
    assert mean(summary, "interrupts.total") > 0
    # One rate per CPU of this machine, adding up to the total (every line counted on
    # some CPU), and the busiest other lines by name.
    per_cpu = [mean(summary, f"interrupts.cpu{cpu}") for cpu in range(os.cpu_count() or 1)]
    assert sum(per_cpu) == pytest.approx(mean(summary, "interrupts.total"), rel=1e-6)


class CapturedFiles(SystemFiles):
    """A kernel's files as captured text, one look after another: which lines a quiet
    machine's interrupts move in 0.3 s is not up to a test."""

    where = "a captured system"

    def __init__(self, looks: list[tuple[float, dict[str, str]]]) -> None:
        self.looks = looks

    def refresh(self) -> None:
        self.looks.pop(0)

    def read_text(self, path: str) -> str:
        return self.looks[0][1][path]

    def glob(self, pattern: str) -> list[str]:
        return sorted(path for path in self.looks[0][1] if path == pattern)

    def now(self) -> float:
        return self.looks[0][0]


def test_interrupts_name_the_busiest_other_lines() -> None:
    header = "           CPU0       CPU1\n"

    def table(loc: int, virtio: int, ahci: int, quiet: int) -> dict[str, str]:
        return {"/proc/interrupts": header + f" 24: {virtio} 0 PCI-MSI virtio0-input.0\n"
                f" 25: {ahci} 0 PCI-MSI ahci\n 26: {quiet} 0 PCI-MSI idle\n"
                f"LOC: {loc} {loc} Local timer interrupts\nERR: 7\n"}

    files = CapturedFiles([(0.0, {}), (10.0, table(1000, 50, 500, 3)), (12.0, table(1500, 4050, 520, 4))])
    monitor = Interrupts.on(files)
    files.refresh()
    monitor.start()
    files.refresh()
    rates = {m.metric.name: m.value for m in monitor.stop()}
    assert rates["interrupts.loc"] == 500 and rates["interrupts.cpu1"] == 250
    # 2,000/s and 10/s are named, busiest first; 0.5/s is under the 1/s that makes a line worth naming.
    assert rates["interrupts.irq_24"] == 2000 and rates["interrupts.irq_25"] == 10
    assert "interrupts.irq_26" not in rates and rates["interrupts.total"] == 500 + 2000 + 10 + 0.5


@pytest.mark.parametrize(("monitor", "reason"), [
    ("schedstat", "CONFIG_SCHEDSTATS"), ("cpufreq", "cpufreq"),
])
def test_a_missing_source_is_said_with_its_reason(tmp_path: Path, monitor: str, reason: str) -> None:
    """The monitor is skipped, or (schedstat with its task group) measures the rest."""
    source = {"schedstat": Path("/proc/schedstat"), "cpufreq": Path("/sys/devices/system/cpu/cpu0/cpufreq")}[monitor]
    if source.exists():
        pytest.skip(f"{source} exists on this machine")
    summary, stderr = run_with(tmp_path, monitor, "echo 1")
    said = [line for line in stderr.splitlines() if line.startswith(f"warning: monitor {monitor}")]
    assert len(said) == 1 and reason in said[0], stderr
    assert "command.value" in summary


def task_groups_possible() -> bool:
    try:
        parent_group()
    except CgroupUnavailable:
        return False
    return os.geteuid() == 0 and Path("/proc/pressure/cpu").exists()


needs_task_groups = pytest.mark.skipif(not task_groups_possible(), reason="needs root, cgroup v2 and PSI")


def pinned_hogs(count: int, cpu: int) -> str:
    """`count` busy shells on one CPU for a second, each a grandchild of the benchmark's
    shell (timeout, taskset) that has exited when the repetition ends; all of it at nice
    -20, so that this machine's other users (at most nice 0) take little of that CPU from
    them: at nice 0 and a load of 7-8, a lone hog waited 59-78% of the time for them,
    and three 87-89%, and the test compared the machine's load instead of the hogs."""
    hog = f"timeout 1 taskset -c {cpu} sh -c 'while :; do :; done'"
    return 'nice -n -20 sh -c "' + " & ".join([hog] * count) + '; wait; echo 1"'


@needs_task_groups
def test_schedstat_sees_the_benchmarks_own_tasks_wait_for_a_cpu(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    three, _ = run_with(tmp_path, "schedstat", pinned_hogs(3, cpu))
    lone, _ = run_with(tmp_path, "schedstat", pinned_hogs(1, cpu))
    # Three on one CPU: one runs, two wait, for as long as they run, so the share of the
    # repetition they waited is the share their CPU time fills (88-94% both at a load of
    # 7-8; the rest is the repetition's start and end, longer the busier the machine). A
    # lone one waits only for other work on that CPU, which at nice -20 takes ~1% a busy
    # task at nice 0 (7-11% measured at that load).
    assert mean(three, "schedstat.task_wait_pct") > 0.8 * mean(three, "schedstat.task_cpu_pct")
    assert mean(lone, "schedstat.task_wait_pct") < mean(three, "schedstat.task_wait_pct") - 30
    # Their CPU time is counted after they exited (a count of live tasks only would be
    # near 0), and pinned to one CPU it is at most that CPU's worth (it is most of it at
    # nice -20; the repetition's start and end, outside the hogs' second, are the rest).
    for summary in (three, lone):
        assert 30 < mean(summary, "schedstat.task_cpu_pct") < 110
    assert dead_task_groups() == []


@needs_task_groups
@pytest.mark.parametrize(("unshared", "reason"), [
    ("umount {mount}", "no cgroup v2 (unified) hierarchy is mounted"),
    ("mount -o remount,bind,ro {mount}", "was refused (EROFS)"),
])
def test_without_a_task_group_the_monitor_says_so_and_the_run_completes(
    tmp_path: Path, unshared: str, reason: str
) -> None:
    """A private mount namespace without the unified hierarchy, or with it read-only."""
    mount = next(line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
                 if line.split()[2] == "cgroup2")
    script = unshared.format(mount=mount) + ' && exec "$@"'
    summary, stderr = run_with(tmp_path, "schedstat", "echo 1", repeat=1,
                               wrapper=("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"))
    said = [line for line in stderr.splitlines() if line.startswith("warning: monitor schedstat")]
    assert len(said) == 1 and reason in said[0] and "benchmark's own tasks" in said[0], stderr
    assert "command.value" in summary and not any(m.startswith("schedstat.task") for m in summary)


class GroupFiles(CapturedFiles):
    """Captured looks in which a file not captured is missing, as open() says it."""

    def read_text(self, path: str) -> str:
        try:
            return super().read_text(path)
        except KeyError:
            raise FileNotFoundError(path) from None


def test_schedstat_halves_measure_without_each_other() -> None:
    """Without /proc/schedstat the task figures stand alone, and the reverse; each
    missing half is one line, and with both missing the monitor is skipped."""
    def look(some: int, full: int, usage: int) -> dict[str, str]:
        return {"/g/cpu.pressure": f"some avg10=0.00 total={some}\nfull avg10=0.00 total={full}\n",
                "/g/cpu.stat": f"usage_usec {usage}\nuser_usec {usage}\nsystem_usec 0\n"}

    files = GroupFiles([(0.0, {}), (10.0, look(100, 0, 0)), (12.0, look(1_500_100, 20_000, 1_000_000))])
    monitor = Schedstat.on(files)
    monitor.tasks = Path("/g")
    monitor.check()
    assert monitor.gaps() == [("run-queue wait per CPU is not measured: no /proc/schedstat on a captured system "
                               "(kernel built without CONFIG_SCHEDSTATS)")]
    files.refresh()
    monitor.start()
    files.refresh()
    shares = {m.metric.name: m.value for m in monitor.stop()}
    assert shares == pytest.approx({"schedstat.task_wait_pct": 75.0, "schedstat.task_stall_pct": 1.0,
                                    "schedstat.task_cpu_pct": 50.0})

    stat = "version 15\ntimestamp 1\ncpu0 0 0 0 0 0 0 100 2000000 3\n"
    files = GroupFiles([(t, {"/proc/schedstat": stat}) for t in (0.0, 1.0, 2.0)])
    monitor = Schedstat.on(files)
    monitor.tasks_missing = "not measured: no cgroup v2 (unified) hierarchy is mounted"
    monitor.check()
    assert monitor.gaps() == [f"the CPU wait of the benchmark's own tasks is {monitor.tasks_missing}"]
    files.refresh()
    monitor.start()
    files.refresh()
    assert {m.metric.name for m in monitor.stop()} == {"schedstat.wait_ms", "schedstat.timeslices",
                                                        "schedstat.cpu0.wait_ms"}

    monitor = Schedstat.on(GroupFiles([(0.0, {})]))
    monitor.tasks_missing = "not measured: no cgroup v2 (unified) hierarchy is mounted"
    with pytest.raises(MonitorUnavailable, match=r"CONFIG_SCHEDSTATS.*not measured: no cgroup v2"):
        monitor.check()


def test_parsers_on_captured_text() -> None:
    softirqs = "                    CPU0       CPU1\n          HI:          1          2\n       TIMER:         10         20\n"
    assert per_cpu_rows(softirqs) == {"HI": 3, "TIMER": 30}
    interrupts = ("           CPU0       CPU1\n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n"
                  "LOC:     100    200   Local timer interrupts\nERR:          0\n")
    assert per_cpu_rows(interrupts) == {"24": 1, "LOC": 300, "ERR": 0}
    assert per_cpu_table(interrupts) == {"24": [1, 0], "LOC": [100, 200], "ERR": [0]}
    assert pressure("some avg10=0.87 avg60=2.54 avg300=2.99 total=176\nfull avg10=0.00 total=5\n") == {
        "some": 176, "full": 5}
    dev = ("Inter-|   Receive |  Transmit\n face |bytes packets|bytes\n"
           "    lo: 100 2 0 0 0 0 0 0 300 4 0 0 0 0 0 0\n")
    assert net_dev(dev)["lo"]["rx_bytes"] == 100 and net_dev(dev)["lo"]["tx_packets"] == 4
    disks = " 253 0 vda 10 0 80 5 20 0 160 7 0 12 12\n 253 1 vda1 10 0 80 5 20 0 160 7 0 12 12\n"
    assert disk_stats(disks, {"vda"}) == {"vda": {
        "reads": 10, "reads_merged": 0, "sectors_read": 80, "ms_reading": 5, "writes": 20, "writes_merged": 0,
        "sectors_written": 160, "ms_writing": 7, "in_flight": 0, "ms_io": 12, "weighted_ms_io": 12}}
    stat = "version 15\ntimestamp 1\ncpu0 0 0 0 0 0 0 100 20 3\ndomain0 3 1 2\ncpu1 0 0 0 0 0 0 200 30 4\n"
    assert schedstat(stat) == {"cpu0": (100, 20, 3), "cpu1": (200, 30, 4)}


def test_list_json_names_every_monitor_with_its_metrics(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "list", "--json"],
                          capture_output=True, text=True, timeout=120, check=True)
    listed = json.loads(proc.stdout)
    monitors = {m["name"]: m for m in listed["monitors"]}
    for name in ("softirqs", "interrupts", "meminfo", "psi", "netdev", "diskstats", "schedstat", "cpufreq",
                 "slabinfo", "numastat"):
        assert monitors[name]["metrics"], name
        assert all(set(m) == {"name", "unit", "direction"} for m in monitors[name]["metrics"])
    assert {b["name"] for b in listed["benchmarks"]} >= {"tbench", "sched-pipe", "command"}


def test_slabinfo_names_the_cache_a_workload_grew(tmp_path: Path) -> None:
    """20000 new files: their dentries and inodes grow slab caches by megabytes."""
    if not os.access("/proc/slabinfo", os.R_OK):
        pytest.skip("/proc/slabinfo is readable only by root")
    script = tmp_path / "files.py"
    # Keep many files' dentries and inodes alive until the repetition's end is read: the
    # files stay on disk (the test's tmp_path) after the command exits.
    script.write_text(f"import pathlib\nd = pathlib.Path({str(tmp_path / 'many')!r}); d.mkdir(exist_ok=True)\n"
                      "for i in range(20000): (d / str(i)).touch()\nprint(1)\n")
    summary, _ = run_with(tmp_path, "slabinfo", f"{PY} {script}", repeat=1)
    assert mean(summary, "slabinfo.active_mib") > 0
    grown = [m for m in summary if m.startswith("slabinfo.") and m.endswith(".active_kib")]
    assert grown, summary.keys()


def test_numastat_counts_allocations(tmp_path: Path) -> None:
    if not Path("/sys/devices/system/node/node0/numastat").exists():
        pytest.skip("kernel without NUMA")
    summary, _ = run_with(tmp_path, "numastat", f"{PY} -c 'x = bytearray(100 << 20); print(1)'")
    assert mean(summary, "numastat.numa_hit") > 1000
