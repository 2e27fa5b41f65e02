"""bench/case_studies.py --quick: every study runs through the real CLI and writes its page."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("rcu", "tbench", "latency", "migration")
FIGURES = ("ftrace-events-fqs", "rcu-gp-fqs", "rcu-gp-fqs-sweep", "tbench-clients", "cpu-latency",
           "migration-cost-64k")


@pytest.mark.slow
def test_quick_run_writes_pages_and_figures(tmp_path: Path) -> None:
    out = tmp_path / "case-studies"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "case_studies.py"), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    index = (out / "README.md").read_text()
    for page in PAGES:
        assert f"({page}.md)" in index
        text = (out / f"{page}.md").read_text()
        assert "## Commands" in text and "## Findings" in text and "## Machine" in text
        assert 'perfline --db "$DB"' in text
        for link in (line for line in text.splitlines() if line.startswith("![")):
            figure = out / link[link.index("](") + 2 : -1]
            assert figure.read_bytes().startswith(b"\x89PNG"), link
    for figure in FIGURES:
        assert (out / f"{figure}.png").stat().st_size > 2000, figure
    assert "| `rcu-gp.ms_per_gp` ms |" in (out / "rcu.md").read_text()
    assert "migration cost matrix (cache_size: 64 KB" in (out / "migration.md").read_text()
    # perfline put the tunable the study changes back where it was
    restored = re.search(r"was (\d+) before the study and (\d+) after it", (out / "rcu.md").read_text())
    assert restored is not None and restored[1] == restored[2]


@pytest.mark.slow
@pytest.mark.vm
def test_quick_vm_studies_write_pages_from_the_guests(tmp_path: Path) -> None:
    """--vm --quick: both studies boot Debian's kernels (registered in the user's cache, as
    `make case-studies` expects them) and their pages describe the guests, not this host."""
    out = tmp_path / "case-studies"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "case_studies.py"), "--quick", "--vm", "--only", "ftrace-vm,pgbench-vm,cpus-vm",
         "--out", str(out)],
        capture_output=True, text=True, timeout=900, check=False,
    )
    if "kernels not registered yet" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr[-3000:]
    ftrace, pgbench = (out / "ftrace-vm.md").read_text(), (out / "pgbench-vm.md").read_text()
    for text in (ftrace, pgbench):
        assert "- guest `debian-6.1`" in text and "- guest `debian-6.12`" in text and "accelerator tcg" in text
    assert "| `ftrace-switch.seconds` s |" in ftrace and "| `rcu-gp.ms_per_gp` ms |" in ftrace
    assert "jiffies_till_first_fqs as the guests read it after boot: A 1, B 0" in ftrace
    assert "| `pgbench.tps` transactions/s |" in pgbench
    assert "perf-profile" in pgbench  # ran and compared, or said why not
    cpus = (out / "cpus-vm.md").read_text()
    assert "| vCPU | max gap µs |" in cpus and "over the 12 ordered vCPU pairs" in cpus
    for figure in ("ftrace-switch-vm", "pgbench-vm", "cpus-vm-latency", "cpus-vm-migration"):
        assert (out / f"{figure}.png").read_bytes().startswith(b"\x89PNG")
