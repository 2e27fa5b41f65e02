"""CPU time shares and scheduler event rates over the interval, from /proc/stat."""

from __future__ import annotations

from perfline.monitors.counters import CounterMonitor, Interval, RateTable
from perfline.records.metric import Direction, Measurement, Metric

PROC_STAT = "/proc/stat"

# Columns of the aggregate `cpu` line, in USER_HZ ticks. guest and guest_nice follow
# but are already counted in user and nice, so they would count twice.
CPU_COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _metric(name: str, unit: str, description: str) -> Metric:
    return Metric(f"proc-stat.{name}", unit, Direction.NEUTRAL, description)


# Each share and the columns it adds up; together they cover every column once.
SHARES: tuple[tuple[Metric, tuple[str, ...]], ...] = (
    (_metric("user_pct", "%", "CPU time in user mode, niced processes included"), ("user", "nice")),
    (_metric("sys_pct", "%", "CPU time in the kernel, interrupts excluded"), ("system",)),
    (_metric("idle_pct", "%", "CPU time idle"), ("idle",)),
    (_metric("iowait_pct", "%", "CPU time idle with I/O outstanding"), ("iowait",)),
    (_metric("irq_pct", "%", "CPU time in hard and soft interrupts"), ("irq", "softirq")),
    (_metric("steal_pct", "%", "CPU time taken by the hypervisor for other guests"), ("steal",)),
)

RATES: RateTable = (
    (_metric("context_switches", "/s", "context switches"), "ctxt"),
    (_metric("interrupts", "/s", "interrupts, all IRQs"), "intr"),
    (_metric("forks", "/s", "processes and threads created"), "processes"),
)


def parse_proc_stat(text: str) -> dict[str, int]:
    """Counters of /proc/stat: `cpu_<column>` for the aggregate cpu line, ctxt, intr, processes."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if name == "cpu":
            values.update(zip((f"cpu_{c}" for c in CPU_COLUMNS), map(int, fields), strict=False))
        elif name in ("ctxt", "intr", "processes"):
            # intr goes on with one count per IRQ line; the first number is their total.
            values[name] = int(fields[0])
    return values


class ProcStat(CounterMonitor):
    name = "proc-stat"
    summary = "CPU user/sys/idle/iowait/irq/steal shares, context switches, interrupts, forks"
    metrics = tuple(metric for metric, _ in SHARES) + tuple(metric for metric, _ in RATES)
    sources = (PROC_STAT,)

    def read(self) -> dict[str, int]:
        return parse_proc_stat(self.files.read_text(PROC_STAT))

    def measure(self, interval: Interval) -> list[Measurement]:
        # iowait (and on some kernels idle) can step backwards on NO_HZ systems;
        # a negative share would be nonsense, so such a column counts as zero.
        ticks = {c: max(0, interval.delta(f"cpu_{c}")) for c in CPU_COLUMNS}
        total = sum(ticks.values())
        rates = interval.rates(RATES)
        if not total:  # an interval shorter than a clock tick has no shares to give
            return rates
        shares = [
            Measurement(metric, 100.0 * sum(ticks[c] for c in columns) / total)
            for metric, columns in SHARES
        ]
        return shares + rates
