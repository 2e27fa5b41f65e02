"""What reading call chains adds to perf-profile's stop: the report pass with the chains
folded under each row against the same pass with `-g none` (self shares only), and a
second pass with `perf script`, all on one perf.data.

    .venv/bin/python bench/perf_profile_stop.py [--seconds 2.4] [--trials 7]

The workload keeps both CPUs busy for `--seconds` while perf records as the monitor
does (its RECORD_OPTIONS): a pipe into sha256sum (kernel and a stripped binary) and a
Python loop (deep user stacks of unresolved addresses). Each trial times every reader
on the same file, perf plus parsing in Python, in turn; medians are printed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from perfline.monitors.perf_profile import PerfProfile
from perfline.monitors.perf_report import (
    FREQUENCY_HZ,
    IDLE_PID,
    RECORD_OPTIONS,
    REPORT_OPTIONS,
    TOP,
    parse_report,
    summarize,
)
from perfline.monitors.perf_tool import PerfSession, find_perf

SELF_ONLY = tuple("none" if option.startswith("folded") else option for option in REPORT_OPTIONS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.4)
    parser.add_argument("--trials", type=int, default=7)
    args = parser.parse_args()
    PerfProfile().check()
    perf = find_perf("perf-profile")
    session = PerfSession(perf, "record", [*RECORD_OPTIONS, "-F", str(FREQUENCY_HZ)])
    try:
        session.command("enable")
        busy(args.seconds)
        session.command("disable")
        session.finish()
        data = str(session.output)
        exclude = {IDLE_PID, session.proc.pid}

        def report(options: tuple[str, ...]) -> Callable[[], int]:
            def read() -> int:
                text = subprocess.run([perf, "report", "-i", data, *options], capture_output=True, text=True,
                                      check=True).stdout
                return len(summarize(parse_report(text), exclude, TOP).profile.chains)
            return read

        def script() -> int:
            text = subprocess.run([perf, "script", "-i", data, "-F", "pid,ip,sym,dso"], capture_output=True,
                                  text=True, check=True).stdout
            return text.count("\n")

        readers = {"report -g none (self shares only)": report(SELF_ONLY),
                   "report -g folded (self shares and chains, one pass)": report(REPORT_OPTIONS),
                   "perf script (a second pass, unparsed)": script}
        times: dict[str, list[float]] = {name: [] for name in readers}
        for _ in range(args.trials):
            for name, read in readers.items():
                start = time.perf_counter()
                read()
                times[name].append(time.perf_counter() - start)
    finally:
        session.close()
    print(f"{args.seconds:g} s recorded on 2 busy CPUs, {args.trials} trials, median:")
    for name, taken in times.items():
        print(f"  {statistics.median(taken) * 1000:7.1f} ms  {name}")


def busy(seconds: float) -> None:
    hash_zeros = subprocess.Popen(
        ["sh", "-c", f"timeout {seconds} sh -c 'while :; do head -c 100000000 /dev/zero | sha256sum; done'"],
        stdout=subprocess.DEVNULL)
    spin = subprocess.Popen([sys.executable, "-c", f"import time\nend = time.monotonic() + {seconds}\n"
                             "while time.monotonic() < end: sorted(str(i) for i in range(1000))"])
    hash_zeros.wait()
    spin.wait()


if __name__ == "__main__":
    main()
