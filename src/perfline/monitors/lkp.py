"""The monitors LKP-tests users reach for first, each reading the kernel's own files
around every repetition: softirqs, interrupts, meminfo, psi, netdev, diskstats,
schedstat, cpufreq, slabinfo and numastat. Each says why when its source is missing or refused."""

from __future__ import annotations

from perfline.monitors.base import MonitorUnavailable
from perfline.monitors.counters import CounterMonitor, Interval
from perfline.monitors.files import HOST, SystemFiles
from perfline.monitors.proc_tables import (
    disk_stats,
    net_dev,
    per_cpu_rows,
    per_cpu_table,
    pressure,
    schedstat,
    slabinfo,
)
from perfline.monitors.vmstat import parse_key_values
from perfline.records.metric import Direction, Measurement, Metric


def _neutral(name: str, unit: str, description: str) -> Metric:
    return Metric(name, unit, Direction.NEUTRAL, description)


def _readable(files: SystemFiles, path: str, monitor: str, why: str) -> None:
    try:
        files.read_text(path)
    except FileNotFoundError:
        raise MonitorUnavailable(f"{monitor}: no {path} on {files.where} ({why})") from None
    except PermissionError:
        raise MonitorUnavailable(
            f"{monitor}: reading {path} on {files.where} is refused (EPERM/EACCES); run as root"
        ) from None


SOFTIRQS = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")


class Softirqs(CounterMonitor):
    name = "softirqs"
    summary = "softirqs raised per second, by kind (NET_RX, TIMER, SCHED, RCU ...), all CPUs"
    metrics = tuple(_neutral(f"softirqs.{k.lower()}", "/s", f"{k} softirqs raised") for k in SOFTIRQS)
    sources = ("/proc/softirqs",)

    def check(self) -> None:
        _readable(self.files, "/proc/softirqs", self.name, "a kernel without /proc/softirqs")

    def read(self) -> dict[str, int]:
        return per_cpu_rows(self.files.read_text("/proc/softirqs"))

    def measure(self, interval: Interval) -> list[Measurement]:
        return interval.present_rates(tuple(zip(self.metrics, SOFTIRQS, strict=True)))


# The architecture's own interrupts a scheduler or memory change moves (x86 names).
INTERRUPT_LINES = {"LOC": "local timer", "RES": "rescheduling IPIs", "CAL": "function call IPIs",
                   "TLB": "TLB shootdowns"}
# ERR and MIS are single error counts, not interrupts taken.
NOT_TAKEN = ("ERR", "MIS")
# Besides those, the busiest lines of each repetition are named (a device's IRQ that a
# change moved: virtio0-input, nvme0q1), at most this many, each at least this rate.
BUSIEST_SHOWN = 6
BUSIEST_MIN_PER_S = 1.0


class Interrupts(CounterMonitor):
    name = "interrupts"
    summary = ("interrupts per second: all, per CPU, local timer, rescheduling and function-call IPIs, TLB "
               "shootdowns, and the busiest other lines by name")
    metrics = (_neutral("interrupts.total", "/s", "every interrupt line, all CPUs"),
               *(_neutral(f"interrupts.{line.lower()}", "/s", what) for line, what in INTERRUPT_LINES.items()))
    sources = ("/proc/interrupts",)

    def check(self) -> None:
        _readable(self.files, "/proc/interrupts", self.name, "a kernel without /proc/interrupts")

    def read(self) -> dict[str, int]:
        table = {name: counts for name, counts in per_cpu_table(self.files.read_text("/proc/interrupts")).items()
                 if name not in NOT_TAKEN}
        values = {f"line {name}": sum(counts) for name, counts in table.items()}
        values["total"] = sum(values.values())
        cpus = max((len(counts) for counts in table.values()), default=0)
        for cpu in range(cpus):
            values[f"cpu {cpu}"] = sum(counts[cpu] for counts in table.values() if len(counts) == cpus)
        return values

    def measure(self, interval: Interval) -> list[Measurement]:
        keys = ["total", *(f"line {line}" for line in INTERRUPT_LINES)]
        found = interval.present_rates(tuple(zip(self.metrics, keys, strict=True)))
        seconds = interval.seconds
        common = interval.before.values.keys() & interval.after.values.keys()
        for key in sorted((k for k in common if k.startswith("cpu ")), key=lambda k: int(k.split()[1])):
            cpu = key.split()[1]
            found.append(Measurement(_neutral(f"interrupts.cpu{cpu}", "/s", f"every interrupt line on CPU {cpu}"),
                                     interval.delta(key) / seconds))
        others = sorted(((interval.delta(k) / seconds, k.removeprefix("line ")) for k in common
                         if k.startswith("line ") and k.removeprefix("line ") not in INTERRUPT_LINES), reverse=True)
        for rate, line in others[:BUSIEST_SHOWN]:
            if rate >= BUSIEST_MIN_PER_S:
                found.append(Measurement(_neutral(f"interrupts.irq_{line.lower()}", "/s", f"interrupt line {line}"),
                                         rate))
        return found


MEMINFO = ("MemAvailable", "Slab", "SUnreclaim", "PageTables", "AnonPages", "Shmem", "Dirty")


class Meminfo(CounterMonitor):
    name = "meminfo"
    summary = "memory at the end of each repetition: available, slab (unreclaimable), page tables, anon, dirty"
    metrics = tuple(_neutral(f"meminfo.{field.lower()}", "MiB", f"{field} at the end") for field in MEMINFO)
    sources = ("/proc/meminfo",)

    def read(self) -> dict[str, int]:
        return parse_key_values(self.files.read_text("/proc/meminfo"))

    def measure(self, interval: Interval) -> list[Measurement]:
        return [Measurement(m, interval.after.values[f] / 1024)
                for m, f in zip(self.metrics, MEMINFO, strict=True) if f in interval.after.values]


PSI = (("cpu", "some"), ("memory", "some"), ("memory", "full"), ("io", "some"), ("io", "full"))


class Psi(CounterMonitor):
    name = "psi"
    summary = "pressure stall information: % of the interval some or all tasks stalled on CPU, memory, I/O"
    metrics = tuple(_neutral(f"psi.{res}_{kind}_pct", "%", f"share of time {kind} tasks stalled on {res}")
                    for res, kind in PSI)
    sources = ("/proc/pressure/cpu", "/proc/pressure/memory", "/proc/pressure/io")

    def check(self) -> None:
        _readable(self.files, "/proc/pressure/cpu", self.name, "kernel built without CONFIG_PSI, or booted with psi=0")

    def read(self) -> dict[str, int]:
        values = {}
        for resource in ("cpu", "memory", "io"):
            for kind, total in pressure(self.files.read_text(f"/proc/pressure/{resource}")).items():
                values[f"{resource}_{kind}"] = total
        return values

    def measure(self, interval: Interval) -> list[Measurement]:
        # Totals are microseconds stalled: over the interval, a share of wall time.
        return interval.present_shares_pct(tuple(zip(self.metrics, (f"{r}_{k}" for r, k in PSI), strict=True)))


NETDEV = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_drop", "tx_drop")


class Netdev(CounterMonitor):
    name = "netdev"
    summary = "network traffic per second, all interfaces (lo included): bytes, packets, drops"
    metrics = tuple(_neutral(f"netdev.{f}", "B/s" if f.endswith("bytes") else "/s", f"{f}, all interfaces")
                    for f in NETDEV)
    sources = ("/proc/net/dev",)

    def read(self) -> dict[str, int]:
        interfaces = net_dev(self.files.read_text("/proc/net/dev"))
        return {f: sum(i.get(f, 0) for i in interfaces.values()) for f in NETDEV}

    def measure(self, interval: Interval) -> list[Measurement]:
        return interval.rates(tuple(zip(self.metrics, NETDEV, strict=True)))


class Diskstats(CounterMonitor):
    name = "diskstats"
    summary = "block I/O of whole disks per second: reads, writes, KiB read and written, await"
    metrics = (
        _neutral("diskstats.reads", "/s", "reads completed"),
        _neutral("diskstats.writes", "/s", "writes completed"),
        _neutral("diskstats.read_kib", "KiB/s", "data read"),
        _neutral("diskstats.write_kib", "KiB/s", "data written"),
        _neutral("diskstats.await_ms", "ms", "mean time an I/O took, queue included"),
    )
    # /sys/block lists whole disks only; each has a `dev` file, read to learn its name.
    sources = ("/proc/diskstats", "/sys/block/*/dev")

    def read(self) -> dict[str, int]:
        # Whole disks only (a partition's I/O is also its disk's).
        devices = {path.split("/")[3] for path in self.files.glob("/sys/block/*/dev")}
        stats = disk_stats(self.files.read_text("/proc/diskstats"), devices)
        return {f: sum(d[f] for d in stats.values())
                for f in ("reads", "writes", "sectors_read", "sectors_written", "ms_reading", "ms_writing")}

    def measure(self, interval: Interval) -> list[Measurement]:
        seconds = interval.seconds
        ios = interval.delta("reads") + interval.delta("writes")
        busy_ms = interval.delta("ms_reading") + interval.delta("ms_writing")
        reads, writes, read_kib, write_kib, await_ms = self.metrics
        return [
            Measurement(reads, interval.delta("reads") / seconds),
            Measurement(writes, interval.delta("writes") / seconds),
            Measurement(read_kib, interval.delta("sectors_read") / 2 / seconds),  # 512-byte sectors
            Measurement(write_kib, interval.delta("sectors_written") / 2 / seconds),
            Measurement(await_ms, busy_ms / ios if ios else 0.0),
        ]


class Schedstat(CounterMonitor):
    """Run-queue wait of every CPU from /proc/schedstat and of the benchmark's own tasks
    from the cgroup they run in (`system.cgroup` on this host, `targets.guest` in a VM).

    The tasks' figures are the group's PSI: `some` is the time during which at least one
    of them was runnable but waiting for a CPU, `full` the time none of its runnable ones
    was running (the benchmark made no progress). On SMP the kernel keeps each per CPU
    and averages them weighted by the group's non-idle time on each CPU, so three busy
    tasks on one CPU read ~100% `some` and one alone ~0%. Both count tasks that exited
    before the repetition's end. Summed /proc/PID/schedstat run delays are not used: they
    would cover only the tasks alive at the end, each since its own start.
    """

    name = "schedstat"
    summary = ("run-queue wait and timeslices per second, all CPUs and each CPU (CONFIG_SCHEDSTATS); and the "
               "share of time the benchmark's own tasks waited for a CPU (PSI of their cgroup, in a VM the guest's)")
    metrics = (
        _neutral("schedstat.wait_ms", "ms/s", "time tasks waited on a run queue, per second, all CPUs"),
        _neutral("schedstat.timeslices", "/s", "timeslices run, all CPUs"),
        Metric("schedstat.task_wait_pct", "%", Direction.LOWER,
               "share of wall time at least one of the benchmark's tasks was runnable but waiting for a CPU"),
        Metric("schedstat.task_stall_pct", "%", Direction.LOWER,
               "share of wall time the benchmark's runnable tasks all waited for a CPU, none running"),
        _neutral("schedstat.task_cpu_pct", "%", "CPU time of the benchmark's tasks, in % of one CPU"),
    )
    sources = ("/proc/schedstat",)
    task_files = ("cpu.pressure", "cpu.stat")

    def __init__(self, files: SystemFiles = HOST) -> None:
        super().__init__(files)
        self._per_cpu_missing = ""

    def check(self) -> None:
        # Each half measures without the other: a kernel without CONFIG_SCHEDSTATS still
        # has the tasks' PSI, and a kernel booted with psi=0 still has /proc/schedstat.
        try:
            _readable(self.files, "/proc/schedstat", self.name, "kernel built without CONFIG_SCHEDSTATS")
        except MonitorUnavailable as exc:
            if self.tasks is None:
                raise MonitorUnavailable(f"{exc}, and the CPU wait of the benchmark's own tasks is "
                                         f"{self.tasks_missing}") from None
            self._per_cpu_missing = str(exc).removeprefix(f"{self.name}: ")

    def gaps(self) -> list[str]:
        found = []
        if self._per_cpu_missing:
            found.append(f"run-queue wait per CPU is not measured: {self._per_cpu_missing}")
        if self.tasks is None:
            found.append(f"the CPU wait of the benchmark's own tasks is {self.tasks_missing}")
        return found

    def read(self) -> dict[str, int]:
        values = {}
        if not self._per_cpu_missing:
            for cpu, (_running, wait, slices) in schedstat(self.files.read_text("/proc/schedstat")).items():
                values[f"{cpu} wait_ns"], values[f"{cpu} timeslices"] = wait, slices
            values["wait_ns"] = sum(v for k, v in values.items() if k.endswith(" wait_ns"))
            values["timeslices"] = sum(v for k, v in values.items() if k.endswith(" timeslices"))
        if self.tasks is not None:
            pressure_file, stat_file = (f"{self.tasks}/{name}" for name in self.task_files)
            # Microseconds, cumulative over the group's life. `full` for a cgroup's CPU
            # came with Linux 5.13; an older kernel has `some` only.
            for kind, total in pressure(self.files.read_text(pressure_file)).items():
                values[f"task {kind}_us"] = total
            values["task usage_us"] = parse_key_values(self.files.read_text(stat_file))["usage_usec"]
        return values

    def measure(self, interval: Interval) -> list[Measurement]:
        wait, slices, task_wait, task_stall, task_cpu = self.metrics
        seconds = interval.seconds
        found = []
        if not self._per_cpu_missing:
            found += [Measurement(wait, interval.delta("wait_ns") / 1e6 / seconds),
                      Measurement(slices, interval.delta("timeslices") / seconds)]
            cpus = sorted((k.split()[0] for k in interval.after.values if k.endswith(" wait_ns")),
                          key=lambda cpu: int(cpu.removeprefix("cpu")))
            for cpu in cpus:
                if f"{cpu} wait_ns" in interval.before.values:
                    metric = _neutral(f"schedstat.{cpu}.wait_ms", "ms/s", f"time tasks waited on {cpu}'s run queue")
                    found.append(Measurement(metric, interval.delta(f"{cpu} wait_ns") / 1e6 / seconds))
        return found + interval.present_shares_pct(
            ((task_wait, "task some_us"), (task_stall, "task full_us"), (task_cpu, "task usage_us")))


class Cpufreq(CounterMonitor):
    name = "cpufreq"
    summary = "mean CPU frequency at the start and end of each repetition, where cpufreq exists"
    metrics = (_neutral("cpufreq.mean_mhz", "MHz", "scaling_cur_freq averaged over CPUs and the two ends"),)
    sources = ("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq",)

    def check(self) -> None:
        if not self.files.glob(self.sources[0]):
            raise MonitorUnavailable(
                f"cpufreq: no /sys/devices/system/cpu/cpu*/cpufreq on {self.files.where} (common in VMs)"
            )

    def read(self) -> dict[str, int]:
        paths = self.files.glob(self.sources[0])
        return {"khz": sum(int(self.files.read_text(p)) for p in paths) // max(len(paths), 1)}

    def measure(self, interval: Interval) -> list[Measurement]:
        (mean,) = self.metrics
        return [Measurement(mean, (interval.before.values["khz"] + interval.after.values["khz"]) / 2 / 1000)]


# A cache is named when its active bytes moved this much over a repetition; at most this
# many, largest move first (the seeds' SLAB/SLUB story is told by a handful of caches).
SLAB_MOVE_BYTES = 64 * 1024
SLAB_CACHES_SHOWN = 8


class Slabinfo(CounterMonitor):
    name = "slabinfo"
    summary = "slab memory at the end of each repetition, and the caches whose active bytes moved most"
    metrics = (
        _neutral("slabinfo.active_mib", "MiB", "active objects' bytes, all caches, at the end"),
        _neutral("slabinfo.total_mib", "MiB", "allocated objects' bytes, all caches, at the end"),
    )
    sources = ("/proc/slabinfo",)

    def check(self) -> None:
        _readable(self.files, "/proc/slabinfo", self.name, "kernel without CONFIG_SLUB_DEBUG or /proc/slabinfo")

    def read(self) -> dict[str, int]:
        caches = slabinfo(self.files.read_text("/proc/slabinfo"))
        values = {f"active {name}": active for name, (active, _) in caches.items()}
        values["active"] = sum(active for active, _ in caches.values())
        values["total"] = sum(total for _, total in caches.values())
        return values

    def measure(self, interval: Interval) -> list[Measurement]:
        active, total = self.metrics
        found = [Measurement(active, interval.after.values["active"] / 2**20),
                 Measurement(total, interval.after.values["total"] / 2**20)]
        moves = sorted(
            ((abs(interval.delta(key)), key.removeprefix("active ")) for key in interval.after.values
             if key.startswith("active ") and key in interval.before.values),
            reverse=True,
        )
        for moved, cache in moves[:SLAB_CACHES_SHOWN]:
            if moved >= SLAB_MOVE_BYTES:
                metric = _neutral(f"slabinfo.{cache}.active_kib", "KiB", f"active bytes of {cache} at the end")
                found.append(Measurement(metric, interval.after.values[f"active {cache}"] / 1024))
        return found


NUMASTAT = ("numa_hit", "numa_miss", "local_node", "other_node")


class Numastat(CounterMonitor):
    name = "numastat"
    summary = "NUMA page allocations per second, all nodes: hits, misses, local and remote"
    metrics = tuple(_neutral(f"numastat.{f}", "pages/s", f"{f} allocations, all nodes") for f in NUMASTAT)
    sources = ("/sys/devices/system/node/node[0-9]*/numastat",)

    def check(self) -> None:
        if not self.files.glob(self.sources[0]):
            raise MonitorUnavailable(
                f"numastat: no /sys/devices/system/node/node*/numastat on {self.files.where} (kernel without NUMA)"
            )

    def read(self) -> dict[str, int]:
        totals = dict.fromkeys(NUMASTAT, 0)
        for path in self.files.glob(self.sources[0]):
            for field, value in parse_key_values(self.files.read_text(path)).items():
                if field in totals:
                    totals[field] += value
        return totals

    def measure(self, interval: Interval) -> list[Measurement]:
        return interval.rates(tuple(zip(self.metrics, NUMASTAT, strict=True)))


__all__ = ["Cpufreq", "Diskstats", "Interrupts", "Meminfo", "Netdev", "Numastat", "Psi", "Schedstat", "Slabinfo",
           "Softirqs"]
