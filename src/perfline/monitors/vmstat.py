"""Memory levels at the end of the interval and paging rates over it, from /proc."""

from __future__ import annotations

from perfline.monitors.counters import CounterMonitor, Interval, RateTable
from perfline.records.metric import Direction, Measurement, Metric

PROC_MEMINFO = "/proc/meminfo"
PROC_VMSTAT = "/proc/vmstat"


def _metric(name: str, unit: str, description: str) -> Metric:
    return Metric(f"vmstat.{name}", unit, Direction.NEUTRAL, description)


# Memory levels at the end: /proc/meminfo field (KiB) shown in MiB.
LEVELS: tuple[tuple[Metric, str], ...] = (
    (_metric("mem_free", "MiB", "free memory (MemFree) at the end"), "MemFree"),
    (_metric("page_cache", "MiB", "page cache (Cached) at the end"), "Cached"),
)

RATES: RateTable = tuple(
    (_metric(counter, unit, description), counter)
    for counter, unit, description in (
        ("pgfault", "/s", "page faults, minor and major"),
        ("pgmajfault", "/s", "major page faults (needing I/O)"),
        ("pswpin", "pages/s", "pages swapped in"),
        ("pswpout", "pages/s", "pages swapped out"),
        # The kernel already converts these two from sectors to KiB.
        ("pgpgin", "KiB/s", "data paged in from block devices"),
        ("pgpgout", "KiB/s", "data paged out to block devices"),
    )
)


def parse_key_values(text: str) -> dict[str, int]:
    """`name value` lines of /proc/vmstat, or `Name: value kB` lines of /proc/meminfo."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, value, *_ = line.split()
        values[name.rstrip(":")] = int(value)
    return values


class Vmstat(CounterMonitor):
    name = "vmstat"
    summary = "free memory and page cache, page faults, swapping and block paging rates"
    metrics = tuple(metric for metric, _ in LEVELS) + tuple(metric for metric, _ in RATES)
    sources = (PROC_MEMINFO, PROC_VMSTAT)

    def read(self) -> dict[str, int]:
        # The two files use distinct names (MemFree vs pgfault), so one namespace holds both.
        return parse_key_values(self.files.read_text(PROC_MEMINFO)) | parse_key_values(
            self.files.read_text(PROC_VMSTAT)
        )

    def measure(self, interval: Interval) -> list[Measurement]:
        levels = [
            Measurement(metric, interval.after.values[field] / 1024) for metric, field in LEVELS
        ]
        return levels + interval.rates(RATES)
