"""Parsers of the /proc tables the LKP-style monitors read; each returns plain numbers.

Kept apart from the monitors so that tests can feed them captured text (a file of
another kernel version, a guest's) and the monitors stay a few lines each.
"""

from __future__ import annotations


def per_cpu_table(text: str) -> dict[str, list[int]]:
    """/proc/softirqs and /proc/interrupts: `NAME: n n n ... [description]` rows → their
    counts per CPU (the header line says how many CPU columns there are). Rows with a
    single count (ERR, MIS) have one entry."""
    lines = text.splitlines()
    cpus = len(lines[0].split())
    rows: dict[str, list[int]] = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        counts = [int(f) for f in rest.split()[:cpus] if f.isdigit()]
        if counts:
            rows[name.strip()] = counts
    return rows


def per_cpu_rows(text: str) -> dict[str, int]:
    """The rows of `per_cpu_table`, summed over the CPUs."""
    return {name: sum(counts) for name, counts in per_cpu_table(text).items()}


def pressure(text: str) -> dict[str, int]:
    """/proc/pressure/X: `some avg10=.. total=US` (and `full ...`) → {"some": us, "full": us}."""
    found = {}
    for line in text.splitlines():
        kind, *fields = line.split()
        for field in fields:
            key, _, value = field.partition("=")
            if key == "total":
                found[kind] = int(value)
    return found


# /proc/net/dev columns after the interface name.
NETDEV_FIELDS = ("rx_bytes", "rx_packets", "rx_errs", "rx_drop", "rx_fifo", "rx_frame", "rx_compressed",
                 "rx_multicast", "tx_bytes", "tx_packets", "tx_errs", "tx_drop", "tx_fifo", "tx_colls",
                 "tx_carrier", "tx_compressed")


def net_dev(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/dev → {interface: {field: value}}."""
    interfaces = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        values = [int(v) for v in rest.split()]
        interfaces[name.strip()] = dict(zip(NETDEV_FIELDS, values, strict=False))
    return interfaces


# /proc/diskstats fields after major, minor and name (Documentation/admin-guide/iostats.rst).
DISK_FIELDS = ("reads", "reads_merged", "sectors_read", "ms_reading", "writes", "writes_merged",
               "sectors_written", "ms_writing", "in_flight", "ms_io", "weighted_ms_io")


def disk_stats(text: str, devices: set[str]) -> dict[str, dict[str, int]]:
    """/proc/diskstats rows of the named devices → {device: {field: value}}."""
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 + len(DISK_FIELDS) and fields[2] in devices:
            found[fields[2]] = dict(zip(DISK_FIELDS, map(int, fields[3:3 + len(DISK_FIELDS)]), strict=True))
    return found


def schedstat(text: str) -> dict[str, tuple[int, int, int]]:
    """/proc/schedstat (version 15+): per `cpuN` line its last three fields, time running
    (ns), time waiting on the run queue (ns) and timeslices → {"cpuN": (run, wait, slices)}."""
    cpus = {}
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0].startswith("cpu") and len(fields) >= 4:
            running, wait, slices = (int(f) for f in fields[-3:])
            cpus[fields[0]] = (running, wait, slices)
    return cpus


def slabinfo(text: str) -> dict[str, tuple[int, int]]:
    """/proc/slabinfo (version 2.x) → {cache: (active bytes, total bytes)}."""
    caches = {}
    for line in text.splitlines()[2:]:
        fields = line.split()
        if len(fields) >= 4:
            active, total, size = int(fields[1]), int(fields[2]), int(fields[3])
            caches[fields[0]] = (active * size, total * size)
    return caches
