"""What `perfline tune` changes on this machine: the CV of sched-pipe and tbench, tuned
and not, interleaved (issue 28).

    .venv/bin/python bench/tune_effect.py [--runs 20] [--cpus 1] [--benchmarks sched-pipe,tbench]

Each run is its own `perfline run BENCH --repeat 1 --warmup 0 --no-monitors --pin CPUS`,
with `--tune` or without, in the order T U U T T U ... (ABBA, so a drift of the machine
falls on both alike); `--tune` tunes around the run and resets after, so every untuned
run sees the machine as it was. sched-pipe runs its two tasks on the benchmark CPU
(`-p cpus=CPUS`), tbench one client there. Printed per benchmark: the mean and CV of
each condition, and the ratio of the tuned variance to the untuned one with its 95%
interval (F distribution: runs are independent, their values roughly normal); what
tuning could change here is in `perfline tune --dry-run --cpus CPUS`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
PRIMARY = {"sched-pipe": "sched-pipe.usecs_per_op", "tbench": "tbench.throughput"}


def one_run(env: dict[str, str], benchmark: str, cpus: str, tuned: bool) -> float:
    params = ["-p", f"cpus={cpus}"] if benchmark == "sched-pipe" else ["-p", "clients=1", "-p", "duration=3"]
    args = [sys.executable, "-m", "perfline", "run", benchmark, *params, "--repeat", "1", "--warmup", "0",
            "--no-monitors", "--pin", cpus, "--json", *(["--tune"] if tuned else [])]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        sys.exit(f"{benchmark}: {proc.stderr[-2000:]}")
    [run] = json.loads(proc.stdout)
    return next(s["value"] for s in run["samples"] if s["metric"] == PRIMARY[benchmark])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="runs a condition")
    parser.add_argument("--cpus", default="1", help="the benchmark CPUs (interrupts are moved off them)")
    parser.add_argument("--benchmarks", default="sched-pipe,tbench")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="perfline-tune-effect-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PERFLINE_DB": f"{tmp}/db",
               "PERFLINE_STATE_DIR": f"{tmp}/state"}
        dry = subprocess.run([sys.executable, "-m", "perfline", "tune", "--dry-run", "--cpus", args.cpus, "--json"],
                             env=env, capture_output=True, text=True, check=True)
        items = json.loads(dry.stdout)["items"]
        print("tunable here: " + ", ".join(i["item"] for i in items if i["changes"]) + "; not: "
              + ", ".join(f"{i['item']} ({i['state']})" for i in items if not i["changes"]))
        print(f"load average at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        for benchmark in args.benchmarks.split(","):
            values: dict[bool, list[float]] = {True: [], False: []}
            for i in range(args.runs):
                for tuned in ((True, False) if i % 2 == 0 else (False, True)):
                    values[tuned].append(one_run(env, benchmark, args.cpus, tuned))
            summary = {}
            for tuned, found in values.items():
                summary[tuned] = (statistics.fmean(found), 100 * statistics.stdev(found) / statistics.fmean(found))
            ratio = statistics.variance(values[True]) / statistics.variance(values[False])
            df = args.runs - 1
            low, high = ratio / stats.f.ppf(0.975, df, df), ratio / stats.f.ppf(0.025, df, df)
            print(f"{benchmark} ({PRIMARY[benchmark]}, {args.runs} runs a condition, interleaved): "
                  f"tuned mean {summary[True][0]:.4g} CV {summary[True][1]:.2f}%; untuned mean "
                  f"{summary[False][0]:.4g} CV {summary[False][1]:.2f}%; variance tuned/untuned {ratio:.2f} "
                  f"[{low:.2f}, {high:.2f}]")
            print(f"  tuned:   {' '.join(f'{v:.4g}' for v in values[True])}")
            print(f"  untuned: {' '.join(f'{v:.4g}' for v in values[False])}")
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
