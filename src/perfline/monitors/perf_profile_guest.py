"""perf-profile inside a VM: the guest's own perf, recording the guest kernel and its tasks.

On this host perf would sample QEMU's code generator, not the guest. A guest on a Debian
root file system has perf (benchmarks that need one install linux-perf there), so the same
recording runs there, driven through the guest agent: perf starts with its events off,
a FIFO pair switches them on and off with perf's acknowledgement (as `PerfSession` does
with pipes here), and the report is read with the same options and parsed with the same
code as on a host.
"""

from __future__ import annotations

import shlex

from perfline.monitors.base import MonitorFailed, MonitorUnavailable, ProfilingMonitor
from perfline.monitors.files import Shell
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
from perfline.records.metric import Measurement
from perfline.records.profile import Profile

WORK = "/tmp/perfline-perf"
# Under emulation perf's start-up takes seconds, not milliseconds.
HANDSHAKE_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 3 * HANDSHAKE_TIMEOUT_S

CHECK = "command -v perf && grep -m 1 ' [Tt] ' /proc/kallsyms"
# A FIFO opened for writing waits for its reader and one read waits for a writer: if perf
# died instead, `timeout` ends the wait and the log says why.


def handshake(word: str) -> str:
    return f'timeout {HANDSHAKE_TIMEOUT_S} sh -c "echo {word} > {WORK}/ctl && read -r ack < {WORK}/ack"'


START = f"""\
rm -rf {WORK} && mkdir {WORK} && mkfifo {WORK}/ctl {WORK}/ack || exit 1
perf record -a -D -1 --control fifo:{WORK}/ctl,{WORK}/ack -o {WORK}/perf.data "$@" \\
    > {WORK}/log 2>&1 < /dev/null &
echo $! > {WORK}/pid
{handshake("enable")} || {{ echo "perf record did not start:"; cat {WORK}/log; exit 1; }} >&2
"""
STOP = f"""\
{handshake("disable")} || {{ echo "perf record did not answer:"; cat {WORK}/log; exit 1; }} >&2
pid=$(cat {WORK}/pid)
kill -INT "$pid"
waited=0
while kill -0 "$pid" 2>/dev/null; do
    [ "$waited" -lt {HANDSHAKE_TIMEOUT_S * 20} ] || {{ echo "perf record did not exit"; exit 1; }} >&2
    sleep 0.05
    waited=$((waited + 1))
done
echo "$pid"
perf report -i {WORK}/perf.data "$@" 2> {WORK}/report.log || {{ cat {WORK}/report.log >&2; exit 1; }}
"""
CLEAN = f'[ -r {WORK}/pid ] && kill -KILL "$(cat {WORK}/pid)" 2>/dev/null; rm -rf {WORK}; true'


class GuestPerfProfile(ProfilingMonitor):
    name = "perf-profile"
    summary = "perf record -a -g on cpu-clock inside the guest (its own perf): symbols, call chains, kernel share"
    metrics = (SAMPLES, KERNEL_PCT)

    def __init__(self, shell: Shell, frequency_hz: int = FREQUENCY_HZ, top: int = TOP) -> None:
        self.shell = shell
        self.frequency_hz = frequency_hz
        self.top = top
        self._started = False
        self._profile = Profile(())

    def check(self) -> None:
        status, out, _ = self.shell.sh(CHECK, REQUEST_TIMEOUT_S)
        lines = out.splitlines()
        if status != 0 and not lines:
            raise MonitorUnavailable(
                f"{self.name}: no perf in the guest: an initramfs guest carries only its benchmark's programs; "
                "a benchmark on a Debian root file system (pgbench, sched-pipe, hackbench) has the guest's perf")
        if not kernel_addresses_visible(lines[1:]):
            raise MonitorUnavailable(f"{self.name}: the guest kernel hides its addresses (/proc/kallsyms), so "
                                     "perf cannot name kernel functions there")

    def start(self) -> None:
        self._profile = Profile(())
        options = [*RECORD_OPTIONS, "-F", str(self.frequency_hz)]
        self._sh(START, options)
        self._started = True

    def stop(self) -> list[Measurement]:
        if not self._started:
            raise RuntimeError(f"{self.name}: stop() without start()")
        self._started = False
        output = self._sh(STOP, list(REPORT_OPTIONS))
        pid, _, report = output.partition("\n")
        # perf's own pid, as on a host: its writing of perf.data is the cost of watching.
        tally = summarize(parse_report(report), {IDLE_PID, int(pid)}, self.top)
        self._profile = tally.profile
        return measurements(tally)

    def profile(self) -> Profile:
        return self._profile

    def close(self) -> None:
        if self._started:
            self._started = False
            self.shell.sh(CLEAN, REQUEST_TIMEOUT_S)

    def _sh(self, script: str, args: list[str]) -> str:
        status, out, err = self.shell.sh(f"set -- {shlex.join(args)}\n{script}", REPORT_TIMEOUT_S)
        if status != 0:
            raise MonitorFailed(f"{self.name} in the guest: {err.strip() or f'exit status {status}'}")
        return out
