"""CPU time of starting `perfline`: `--help`, and `runs --limit 1` on a small SQLite store.

    .venv/bin/python bench/startup.py [--runs 5] [--against OTHER/src]

Every command the user types and every CLI test's subprocess pays the imports of
perfline.cli.app before the command does anything. The figure is the child's user+sys
CPU time (os.wait4), the median of --runs; on a loaded machine the wall clock measures
the load, not perfline. Target: each command under 1 s of CPU.

Each command runs once first, uncounted, with bytecode writing allowed (whatever
PYTHONDONTWRITEBYTECODE says): the figures are of an installed perfline, whose modules are
compiled once, not at every start.

The store is made once, in a temporary directory, by `perfline run command` (three
repetitions of `echo 1`): one real run, as a user's first looks at `perfline runs`.
With --against, the same commands run with that source tree first on PYTHONPATH
(e.g. /work/main/src), alternately with this one's, so a shared machine's load falls on
both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
TARGET_S = 1.0


def child_env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPATH": str(src)}


def cpu_seconds(argv: list[str], src: Path) -> float:
    """user+sys of one run of `python -m perfline ARGV` with `src` first on the path."""
    env = child_env(src)
    proc = subprocess.Popen([sys.executable, "-m", "perfline", *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"perfline {' '.join(argv)} failed ({proc.returncode}): {err.decode()}")
    return usage.ru_utime + usage.ru_stime


def make_store(directory: Path) -> Path:
    db = directory / "small.db"
    subprocess.run([sys.executable, "-m", "perfline", "--db", str(db), "run", "command", "-p", "cmd=echo 1",
                    "--repeat", "3", "--no-monitors"], env=child_env(SRC), check=True, capture_output=True)
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="Runs of each command; the median is shown.")
    parser.add_argument("--against", type=Path, help="Another perfline source tree to time alike.")
    args = parser.parse_args()
    trees = {"this tree": SRC} | ({"against": args.against.resolve()} if args.against else {})
    with tempfile.TemporaryDirectory() as tmp:
        db = make_store(Path(tmp))
        commands = {"perfline --help": ["--help"], "perfline runs --limit 1": ["--db", str(db), "runs", "--limit", "1"]}
        times: dict[tuple[str, str], list[float]] = {(c, t): [] for c in commands for t in trees}
        for argv in commands.values():
            for src in trees.values():
                cpu_seconds(argv, src)  # compiles the modules once
        for _ in range(args.runs):
            for command, argv in commands.items():
                for tree, src in trees.items():
                    times[command, tree].append(cpu_seconds(argv, src))
    print(f"user+sys CPU s, median of {args.runs} (min-max); target < {TARGET_S:g} s")
    for (command, tree), seconds in times.items():
        median = statistics.median(seconds)
        verdict = "meets" if median < TARGET_S else "MISSES"
        print(f"  {command:<26} {tree:<10} {trees[tree]}  {median:.3f} ({min(seconds):.3f}-{max(seconds):.3f})"
              f"  {verdict if tree == 'this tree' else ''}")


if __name__ == "__main__":
    main()
