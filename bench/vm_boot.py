"""Time from `perfline run --target qemu` to the first sample taken in the guest.

    .venv/bin/python bench/vm_boot.py [--kernel debian-6.1] [--accel tcg] [--trials 5]
        [--benchmark sched-pipe -p loops=1000]

Each trial starts `perfline run rcu-gp -p iterations=1 --repeat 1` (or the benchmark
given) against a fresh SQLite store and watches the store for the first sample, so the
figure covers all a user waits for: Python start-up, job parsing, the initramfs
(cached after the first trial) or root file system (built by an earlier run), QEMU,
the kernel's boot, the guest agent, the guest fingerprint, the benchmark's guest
set-up (pgbench: start PostgreSQL, load the data) and one repetition. The VM's own boot time (QEMU start to agent ready) is read from the run's
settings. The target is 5 s under TCG on a 2-CPU machine, 2 s with KVM.

The kernel must be registered (`perfline kernels add-deb linux-image-cloud-amd64
--name debian-6.1`). The host's load average is printed with each trial: TCG runs on
the host's CPUs, so a busy host shows up directly in these figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.01
TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Trial:
    first_sample_s: float
    vm_boot_s: float
    accel: str
    load: float


def first_sample_count(db: Path) -> int:
    try:
        with sqlite3.connect(db) as connection:
            return connection.execute(
                "SELECT count(*) FROM samples WHERE source = 'benchmark'"
            ).fetchone()[0]
    except sqlite3.Error:  # not created yet, or perfline is creating the schema
        return 0


def trial(kernel: str, accel: str, workdir: Path, benchmark: list[str]) -> Trial:
    db = workdir / "perfline.db"
    load = os.getloadavg()[0]
    argv = [
        sys.executable, "-m", "perfline", "--db", str(db), "run", *benchmark,
        "--repeat", "1", "--warmup", "0", "--no-monitors",
        "--target", "qemu", "--kernel", kernel, "--accel", accel, "--json",
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while first_sample_count(db) == 0:
        if proc.poll() is not None:
            raise SystemExit(f"perfline exited without a sample:\n{proc.communicate()[1]}")
        if time.monotonic() - started > TIMEOUT_S:
            proc.kill()
            raise SystemExit(f"no sample within {TIMEOUT_S:g} s")
        time.sleep(POLL_S)
    first = time.monotonic() - started
    stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    if proc.returncode != 0:
        raise SystemExit(f"perfline run failed:\n{stderr}")
    [run] = json.loads(stdout)
    settings = run["settings"]
    return Trial(first, settings["vm_boot_s"], settings["vm_accel"], load)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", default="debian-6.1", help="a registered kernel")
    parser.add_argument("--accel", default="tcg", choices=("auto", "kvm", "tcg"))
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--benchmark", default="rcu-gp")
    parser.add_argument("-p", "--param", action="append", help="NAME=VALUE, for the benchmark")
    args = parser.parse_args()
    params = args.param if args.param is not None else ["iterations=1"] if args.benchmark == "rcu-gp" else []
    benchmark = [args.benchmark, *(option for param in params for option in ("-p", param))]
    trials = []
    for number in range(1, args.trials + 1):
        with tempfile.TemporaryDirectory(prefix="perfline-vm-boot-") as scratch:
            result = trial(args.kernel, args.accel, Path(scratch), benchmark)
        trials.append(result)
        print(
            f"trial {number}: first sample {result.first_sample_s:.2f} s "
            f"(VM boot {result.vm_boot_s:.2f} s, {result.accel}, host load {result.load:.2f})",
            flush=True,
        )
    firsts = [t.first_sample_s for t in trials]
    boots = [t.vm_boot_s for t in trials]
    print(
        f"\n{' '.join(benchmark)}, {args.kernel}, {trials[0].accel}, {len(trials)} trials on {os.cpu_count()} CPUs\n"
        f"  perfline run -> first sample: median {statistics.median(firsts):.2f} s, "
        f"min {min(firsts):.2f} s, max {max(firsts):.2f} s\n"
        f"  of which VM boot (QEMU start -> agent ready): median {statistics.median(boots):.2f} s, "
        f"min {min(boots):.2f} s"
    )


if __name__ == "__main__":
    main()
