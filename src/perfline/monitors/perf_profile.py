"""perf-profile on this host: `perf record -a -g` on cpu-clock across all CPUs over each
repetition, switched on and off precisely (`perf_tool.PerfSession`), its report read by
`perf_report`. A case in a VM gets `perf_profile_guest` instead, the guest's own perf.
"""

from __future__ import annotations

from pathlib import Path

from perfline.monitors.base import Monitor, MonitorUnavailable, ProfilingMonitor
from perfline.monitors.files import HOST, SystemFiles
from perfline.monitors.perf_profile_guest import GuestPerfProfile
from perfline.monitors.perf_report import (
    FREQUENCY_HZ,
    IDLE_PID,
    KERNEL_PCT,
    RECORD_OPTIONS,
    REPORT_OPTIONS,
    REPORT_TIMEOUT_S,
    SAMPLES,
    TOP,
    kernel_addresses_visible,
    measurements,
    parse_report,
    summarize,
)
from perfline.monitors.perf_tool import PerfSession, find_perf, system_wide_perf
from perfline.records.metric import Measurement
from perfline.records.profile import Profile
from perfline.system.process import run

KALLSYMS = Path("/proc/kallsyms")
KPTR_RESTRICT = Path("/proc/sys/kernel/kptr_restrict")


class PerfProfile(ProfilingMonitor):
    name = "perf-profile"
    summary = ("perf record -a -g on cpu-clock: top kernel and user symbols by self share, top call chains, "
               "kernel share")
    metrics = (SAMPLES, KERNEL_PCT)
    packages = ("linux-perf",)

    @classmethod
    def on(cls, files: SystemFiles) -> Monitor:
        # Here perf would sample QEMU's code generator; inside, the guest's own perf.
        if files is HOST:
            return cls()
        if files.shell is None:
            raise MonitorUnavailable(f"{cls.name}: cannot run commands on {files.where}")
        return GuestPerfProfile(files.shell)

    def __init__(self, frequency_hz: int = FREQUENCY_HZ, top: int = TOP) -> None:
        self.frequency_hz = frequency_hz
        self.top = top
        self._session: PerfSession | None = None
        self._perf = ""
        self._profile = Profile(())

    def check(self) -> None:
        system_wide_perf(self.name)
        try:
            with KALLSYMS.open() as kallsyms:
                visible = kernel_addresses_visible(kallsyms)
        except FileNotFoundError as exc:
            raise MonitorUnavailable(
                f"{self.name}: this kernel has no /proc/kallsyms (CONFIG_KALLSYMS), "
                "so perf cannot name kernel functions"
            ) from exc
        if not visible:
            raise MonitorUnavailable(
                f"{self.name}: kernel.kptr_restrict is {KPTR_RESTRICT.read_text().strip()} "
                "and hides kernel addresses from this process, so perf cannot name kernel "
                "functions: run as root with kptr_restrict 1, or `sysctl kernel.kptr_restrict=0`"
            )

    def start(self) -> None:
        self._perf = find_perf(self.name)
        self.close()
        self._profile = Profile(())
        options = [*RECORD_OPTIONS, "-F", str(self.frequency_hz)]
        self._session = PerfSession(self._perf, "record", options)
        try:
            self._session.command("enable")
        except BaseException:
            self.close()
            raise

    def stop(self) -> list[Measurement]:
        session = self._session
        if session is None:
            raise RuntimeError(f"{self.name}: stop() without start()")
        try:
            session.command("disable")
            session.finish()
            report = run(
                [self._perf, "report", "-i", str(session.output), *REPORT_OPTIONS],
                timeout=REPORT_TIMEOUT_S,
            ).stdout
        finally:
            self.close()
        # perf's own pid: its writing of perf.data is the cost of watching, not the workload.
        tally = summarize(parse_report(report), {IDLE_PID, session.proc.pid}, self.top)
        self._profile = tally.profile
        return measurements(tally)

    def profile(self) -> Profile:
        return self._profile

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
