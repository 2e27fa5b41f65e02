"""The monitors LKP-tests users reach for first, each reading the kernel's own files
around every repetition: softirqs, interrupts, meminfo, psi, netdev, diskstats,
schedstat, cpufreq, slabinfo and numastat. Each says why when its source is missing or refused."""

from __future__ import annotations

from pathlib import Path

from perfline.monitors.base import MonitorUnavailable
from perfline.monitors.counters import CounterMonitor, Interval
from perfline.monitors.proc_tables import disk_stats, net_dev, per_cpu_rows, pressure, schedstat, slabinfo
from perfline.monitors.vmstat import parse_key_values
from perfline.records.metric import Direction, Measurement, Metric

PROC = Path("/proc")
SYS = Path("/sys")


def _neutral(name: str, unit: str, description: str) -> Metric:
    return Metric(name, unit, Direction.NEUTRAL, description)


def _readable(path: Path, monitor: str, why: str) -> None:
    try:
        path.read_bytes()
    except FileNotFoundError:
        raise MonitorUnavailable(f"{monitor}: no {path} ({why})") from None
    except PermissionError:
        raise MonitorUnavailable(f"{monitor}: reading {path} is refused (EPERM/EACCES); run as root") from None


SOFTIRQS = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")


class Softirqs(CounterMonitor):
    name = "softirqs"
    summary = "softirqs raised per second, by kind (NET_RX, TIMER, SCHED, RCU ...), all CPUs"
    metrics = tuple(_neutral(f"softirqs.{k.lower()}", "/s", f"{k} softirqs raised") for k in SOFTIRQS)

    def check(self) -> None:
        _readable(PROC / "softirqs", self.name, "a kernel without /proc/softirqs")

    def read(self) -> dict[str, int]:
        return per_cpu_rows((PROC / "softirqs").read_text())

    def measure(self, interval: Interval) -> list[Measurement]:
        return interval.present_rates(tuple(zip(self.metrics, SOFTIRQS, strict=True)))


# The architecture's own interrupts a scheduler or memory change moves (x86 names).
INTERRUPT_LINES = {"LOC": "local timer", "RES": "rescheduling IPIs", "CAL": "function call IPIs",
                   "TLB": "TLB shootdowns"}


class Interrupts(CounterMonitor):
    name = "interrupts"
    summary = "interrupts per second: all, local timer, rescheduling and function-call IPIs, TLB shootdowns"
    metrics = (_neutral("interrupts.total", "/s", "every interrupt line, all CPUs"),
               *(_neutral(f"interrupts.{line.lower()}", "/s", what) for line, what in INTERRUPT_LINES.items()))

    def check(self) -> None:
        _readable(PROC / "interrupts", self.name, "a kernel without /proc/interrupts")

    def read(self) -> dict[str, int]:
        rows = per_cpu_rows((PROC / "interrupts").read_text())
        # ERR and MIS are single error counts, not interrupts taken.
        return {**rows, "total": sum(v for k, v in rows.items() if k not in ("ERR", "MIS"))}

    def measure(self, interval: Interval) -> list[Measurement]:
        return interval.present_rates(tuple(zip(self.metrics, ["total", *INTERRUPT_LINES], strict=True)))


MEMINFO = ("MemAvailable", "Slab", "SUnreclaim", "PageTables", "AnonPages", "Shmem", "Dirty")


class Meminfo(CounterMonitor):
    name = "meminfo"
    summary = "memory at the end of each repetition: available, slab (unreclaimable), page tables, anon, dirty"
    metrics = tuple(_neutral(f"meminfo.{field.lower()}", "MiB", f"{field} at the end") for field in MEMINFO)

    def read(self) -> dict[str, int]:
        return parse_key_values((PROC / "meminfo").read_text())

    def measure(self, interval: Interval) -> list[Measurement]:
        return [Measurement(m, interval.after.values[f] / 1024)
                for m, f in zip(self.metrics, MEMINFO, strict=True) if f in interval.after.values]


PSI = (("cpu", "some"), ("memory", "some"), ("memory", "full"), ("io", "some"), ("io", "full"))


class Psi(CounterMonitor):
    name = "psi"
    summary = "pressure stall information: % of the interval some or all tasks stalled on CPU, memory, I/O"
    metrics = tuple(_neutral(f"psi.{res}_{kind}_pct", "%", f"share of time {kind} tasks stalled on {res}")
                    for res, kind in PSI)

    def check(self) -> None:
        _readable(PROC / "pressure/cpu", self.name, "kernel built without CONFIG_PSI, or booted with psi=0")

    def read(self) -> dict[str, int]:
        values = {}
        for resource in ("cpu", "memory", "io"):
            for kind, total in pressure((PROC / "pressure" / resource).read_text()).items():
                values[f"{resource}_{kind}"] = total
        return values

    def measure(self, interval: Interval) -> list[Measurement]:
        # Totals are microseconds stalled: over the interval, a share of wall time.
        return [Measurement(m, interval.delta(f"{r}_{k}") / 1e6 / interval.seconds * 100)
                for m, (r, k) in zip(self.metrics, PSI, strict=True) if f"{r}_{k}" in interval.after.values]


NETDEV = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_drop", "tx_drop")


class Netdev(CounterMonitor):
    name = "netdev"
    summary = "network traffic per second, all interfaces (lo included): bytes, packets, drops"
    metrics = tuple(_neutral(f"netdev.{f}", "B/s" if f.endswith("bytes") else "/s", f"{f}, all interfaces")
                    for f in NETDEV)

    def read(self) -> dict[str, int]:
        interfaces = net_dev((PROC / "net/dev").read_text())
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

    def read(self) -> dict[str, int]:
        # Whole disks only (a partition's I/O is also its disk's); loop and zram devices
        # are not disks a benchmark's data go to unless it made them.
        devices = {p.name for p in (SYS / "block").iterdir()}
        stats = disk_stats((PROC / "diskstats").read_text(), devices)
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
    name = "schedstat"
    summary = "run-queue wait and timeslices per second, all CPUs (CONFIG_SCHEDSTATS)"
    metrics = (
        _neutral("schedstat.wait_ms", "ms/s", "time tasks waited on a run queue, per second, all CPUs"),
        _neutral("schedstat.timeslices", "/s", "timeslices run, all CPUs"),
    )

    def check(self) -> None:
        _readable(PROC / "schedstat", self.name, "kernel built without CONFIG_SCHEDSTATS")

    def read(self) -> dict[str, int]:
        return schedstat((PROC / "schedstat").read_text())

    def measure(self, interval: Interval) -> list[Measurement]:
        wait, slices = self.metrics
        return [Measurement(wait, interval.delta("wait_ns") / 1e6 / interval.seconds),
                Measurement(slices, interval.delta("timeslices") / interval.seconds)]


class Cpufreq(CounterMonitor):
    name = "cpufreq"
    summary = "mean CPU frequency at the start and end of each repetition, where cpufreq exists"
    metrics = (_neutral("cpufreq.mean_mhz", "MHz", "scaling_cur_freq averaged over CPUs and the two ends"),)

    def check(self) -> None:
        if not self._files():
            raise MonitorUnavailable("cpufreq: no /sys/devices/system/cpu/cpu*/cpufreq (common in VMs)")

    def _files(self) -> list[Path]:
        return sorted((SYS / "devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_cur_freq"))

    def read(self) -> dict[str, int]:
        files = self._files()
        return {"khz": sum(int(f.read_text()) for f in files) // max(len(files), 1)}

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

    def check(self) -> None:
        _readable(PROC / "slabinfo", self.name, "kernel without CONFIG_SLUB_DEBUG or /proc/slabinfo")

    def read(self) -> dict[str, int]:
        caches = slabinfo((PROC / "slabinfo").read_text())
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

    def _files(self) -> list[Path]:
        return sorted((SYS / "devices/system/node").glob("node[0-9]*/numastat"))

    def check(self) -> None:
        if not self._files():
            raise MonitorUnavailable("numastat: no /sys/devices/system/node/node*/numastat (kernel without NUMA)")

    def read(self) -> dict[str, int]:
        totals = dict.fromkeys(NUMASTAT, 0)
        for path in self._files():
            for field, value in parse_key_values(path.read_text()).items():
                if field in totals:
                    totals[field] += value
        return totals

    def measure(self, interval: Interval) -> list[Measurement]:
        return interval.rates(tuple(zip(self.metrics, NUMASTAT, strict=True)))


__all__ = ["Cpufreq", "Diskstats", "Interrupts", "Meminfo", "Netdev", "Numastat", "Psi", "Schedstat", "Slabinfo",
           "Softirqs"]
