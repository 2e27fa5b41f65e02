"""The monitor overhead bench runs: its quick version, end to end, on real sched-pipe."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "monitor_overhead.py"


def test_monitor_overhead_quick_prints_both_rows() -> None:
    proc = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.strip().startswith("sched-pipe")]
    assert len(rows) == 2 and "default" in rows[0] and "every monitor" in rows[1]
    for row in rows:
        assert re.search(r"[+-]\d+\.\d+% \[[+-]\d+\.\d+, [+-]\d+\.\d+\]", row), row
    assert "every monitor here:" in proc.stdout and "proc-stat" in proc.stdout
