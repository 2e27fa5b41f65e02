"""How much of a benchmark's noise this host's pace explains (issue 27, point 4).

    .venv/bin/python bench/pace_covariate.py VALUES COMMAND...

Takes VALUES values of COMMAND (run by sh; its last line of stdout is the value, as a
bisection's `--command`), each between two readings of native/build/pace, and prints the
values' spread, the pace's, their correlation, the spread left after adjusting each value
by its pace (a regression on the mean of the two readings, and value / pace), the lag-1
autocorrelation and the spread of neighbours' differences / sqrt 2 (what a value paired
with one taken next to it sees). For bench/lz4_bisect.sh's measure:

    .venv/bin/python bench/pace_covariate.py 150 \\
        PERFLINE_TREE=/tmp/lz4g python3 WORKDIR/measure.py WORKDIR/frame.lz4
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

PACE = Path(__file__).resolve().parents[1] / "native" / "build" / "pace"


def pace() -> float:
    return float(subprocess.run([str(PACE)], capture_output=True, text=True, check=True).stdout)


def value(command: str) -> float:
    out = subprocess.run(command, shell=True, capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n, command = int(sys.argv[1]), " ".join(sys.argv[2:])
    paces, values = [], []
    for _ in range(n):
        before = pace()
        values.append(value(command))
        paces.append((before + pace()) / 2)
    p, v = np.array(paces), np.array(values)
    slope = np.polyfit(p, v, 1)[0]
    adjusted = v - slope * (p - p.mean())
    ratio = v / p
    neighbours = np.diff(v)[::2] / np.sqrt(2)

    def pct(x: np.ndarray, mean: float) -> float:
        return float(100 * x.std(ddof=1) / mean)

    print(f"{n} values: mean {v.mean():.4g}, sd {pct(v, v.mean()):.1f}%; pace sd {pct(p, p.mean()):.1f}%; "
          f"correlation {np.corrcoef(p, v)[0, 1]:.2f}")
    print(f"adjusted by the pace: sd {pct(adjusted, v.mean()):.1f}% (regression), {pct(ratio, ratio.mean()):.1f}% "
          f"(value / pace)")
    print(f"lag-1 autocorrelation {np.corrcoef(v[:-1], v[1:])[0, 1]:.2f}; neighbours' differences / sqrt 2: "
          f"sd {pct(neighbours, v.mean()):.1f}%")


if __name__ == "__main__":
    main()
