"""Tunables applied for real on this kernel and restored, also after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from processes import assert_gone, children, kill_leftovers, sigkill_once_started
from test_cli import perfline, start, wait_for_samples

from perfline.targets.local import RELEVANT_SYSCTLS

SWAPPINESS = Path("/proc/sys/vm/swappiness")
HOG = "/bin/sh -c while :; do :; done"
FQS = Path("/sys/module/rcutree/parameters/jiffies_till_first_fqs")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing sysctls needs root")


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own journal directory, so a test never restores another's values."""
    state = tmp_path / "state"
    monkeypatch.setenv("PERFLINE_STATE_DIR", str(state))
    return state


def job(tmp_path: Path, body: str, cmd: str = "cat /proc/sys/vm/swappiness") -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(
        "benchmark: command\n"
        f"params: {{cmd: '{cmd}'}}\n"
        "repeat: 2\nwarmup: 0\nmonitors: []\n" + body
    )
    return path


def test_sysctl_applied_during_the_run_and_restored(tmp_path: Path) -> None:
    before = int(SWAPPINESS.read_text())
    new = before + 1 if before < 100 else before - 1
    runs = json.loads(
        perfline(tmp_path / "db", "run", str(job(tmp_path, f"tunables: {{sysctl: {{vm.swappiness: {new}}}}}\n")), "--json").stdout
    )
    [run] = runs
    assert run["summary"]["command.value"]["mean"] == new  # the benchmark saw the new value
    assert run["fingerprint"]["sysctls"]["vm.swappiness"] == str(new)
    assert run["settings"]["tunables_applied"] == {"sysctl vm.swappiness": f"{before}→{new}"}
    assert int(SWAPPINESS.read_text()) == before


def test_matrix_over_a_tunable_gives_a_run_per_value(tmp_path: Path) -> None:
    before = int(SWAPPINESS.read_text())
    values = [before + 1, before + 2] if before < 99 else [before - 1, before - 2]
    runs = json.loads(
        perfline(tmp_path / "db", "run", str(job(tmp_path, f"tunables: {{sysctl: {{vm.swappiness: {values}}}}}\n")), "--json").stdout
    )
    assert [r["summary"]["command.value"]["mean"] for r in runs] == values
    assert [r["fingerprint"]["sysctls"]["vm.swappiness"] for r in runs] == [str(v) for v in values]
    assert [r["tunables"] for r in runs] == [{"sysctl": {"vm.swappiness": v}} for v in values]
    assert int(SWAPPINESS.read_text()) == before


@pytest.mark.skipif(not FQS.exists(), reason="rcutree parameters not exposed")
def test_sysfs_module_parameter(tmp_path: Path) -> None:
    before = FQS.read_text().strip()
    new = "3" if before != "3" else "2"
    [run] = json.loads(
        perfline(tmp_path / "db", "run", str(job(tmp_path, f"tunables: {{sysfs: {{{FQS}: {new}}}}}\n", cmd=f"cat {FQS}")), "--json").stdout
    )
    assert run["summary"]["command.value"]["mean"] == int(new)
    assert FQS.read_text().strip() == before


def test_refused_knob_changes_nothing(tmp_path: Path, private_state: Path) -> None:
    before = SWAPPINESS.read_text()
    new = int(before) + 1 if int(before) < 100 else int(before) - 1
    proc = perfline(
        tmp_path / "db", "run",
        str(job(tmp_path, f"tunables: {{sysctl: {{vm.swappiness: {new}, kernel.osrelease: x}}}}\n")),
        "--json", check=False,
    )
    assert proc.returncode == 1
    [run] = json.loads(proc.stdout)
    assert run["status"] == "failed"
    assert "sysctl kernel.osrelease: read-only" in run["error"]
    assert SWAPPINESS.read_text() == before
    assert not list(private_state.glob("journal.*"))


def test_sigkilled_run_is_restored_by_the_next_command(tmp_path: Path, private_state: Path) -> None:
    db = tmp_path / "db"
    before = int(SWAPPINESS.read_text())
    new = before + 1 if before < 100 else before - 1
    spec = job(tmp_path, f"tunables: {{sysctl: {{vm.swappiness: {new}}}}}\n",
               cmd="sleep 0.2; cat /proc/sys/vm/swappiness")
    spec.write_text(spec.read_text().replace("repeat: 2", "repeat: 500"))
    proc = start(db, "run", str(spec))
    try:
        wait_for_samples(db, 2, proc)
        assert int(SWAPPINESS.read_text()) == new
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert int(SWAPPINESS.read_text()) == new  # nobody restored it yet
    assert list(private_state.glob("journal.*.json"))
    listing = perfline(db, "runs")
    assert int(SWAPPINESS.read_text()) == before
    assert "restored /proc/sys/vm/swappiness" in listing.stderr
    assert not list(private_state.glob("journal.*.json"))
    assert "nothing to restore" in perfline(db, "restore").stdout


def test_load_hogs_run_beside_each_sample_and_are_gone_after(tmp_path: Path) -> None:
    count = f"pgrep -cfx \"{HOG}\" || true"
    [run] = json.loads(
        perfline(tmp_path / "db", "run", str(job(tmp_path, "load: 2\n", cmd=count)), "--json").stdout
    )
    assert run["summary"]["command.value"]["mean"] == 2
    left = subprocess.run(["pgrep", "-cfx", HOG], capture_output=True, text=True).stdout.strip()
    assert left == "0"


def test_pin_restricts_the_benchmark(tmp_path: Path) -> None:
    cpus = "python3 -c \"import os; print(len(os.sched_getaffinity(0)))\""
    [run] = json.loads(
        perfline(tmp_path / "db", "run", str(job(tmp_path, "tunables: {pin: '0'}\n", cmd=cpus)), "--json").stdout
    )
    assert run["summary"]["command.value"]["mean"] == 1
    assert run["settings"]["tunables_applied"]["pin"] == "0"


def test_governor_without_cpufreq_is_a_clear_error(tmp_path: Path) -> None:
    if list(Path("/sys/devices/system/cpu/cpufreq").glob("policy*")):
        pytest.skip("this machine has cpufreq; the error path needs one without")
    proc = perfline(tmp_path / "db", "run", str(job(tmp_path, "tunables: {governor: performance}\n")),
                    "--json", check=False)
    [run] = json.loads(proc.stdout)
    assert run["status"] == "failed" and "no cpufreq policies" in run["error"]


def test_ab_with_sysctl_sides(tmp_path: Path) -> None:
    before = int(SWAPPINESS.read_text())
    a, b = (before + 1, before + 2) if before < 99 else (before - 1, before - 2)
    result = json.loads(
        perfline(tmp_path / "db", "ab", "command", "-p", "cmd=cat /proc/sys/vm/swappiness",
                 "--a", f"sysctl:vm.swappiness={a}", "--b", f"sysctl:vm.swappiness={b}",
                 "--pairs", "3", "--warmup", "0", "--no-monitors", "--json").stdout
    )
    [metric] = result["cases"][0]["metrics"]
    assert metric["base"]["mean"] == a and metric["others"][0]["mean"] == b
    assert int(SWAPPINESS.read_text()) == before


def test_sigkilled_run_takes_its_load_hogs_along(tmp_path: Path) -> None:
    spec = job(tmp_path, "load: 1\n", cmd="sleep 3; echo 1")
    proc = start(tmp_path / "db", "run", str(spec))
    hogs = sigkill_once_started(proc, lambda: children(proc.pid, HOG), "CPU hog")
    try:
        assert_gone(hogs, "CPU hogs")
    finally:
        kill_leftovers(hogs)


LEASE_BREAK = Path("/proc/sys/fs/lease-break-time")  # harmless, and not in RELEVANT_SYSCTLS


def other_values(path: Path) -> tuple[int, int]:
    before = int(path.read_text())
    return (before + 1, before + 2) if before < 1000 else (before - 1, before - 2)


@pytest.mark.skipif(not LEASE_BREAK.exists(), reason="no fs.lease-break-time sysctl")
def test_every_applied_knob_is_in_the_fingerprint_and_compare_lists_it(tmp_path: Path) -> None:
    assert "fs.lease-break-time" not in RELEVANT_SYSCTLS
    before = LEASE_BREAK.read_text()
    values = list(other_values(LEASE_BREAK))
    db = tmp_path / "db"
    spec = job(tmp_path, f"tunables: {{sysctl: {{fs.lease-break-time: {values}}}, pin: '0'}}\n",
               cmd=f"cat {LEASE_BREAK}")
    runs = json.loads(perfline(db, "run", str(spec), "--json").stdout)
    assert [r["summary"]["command.value"]["mean"] for r in runs] == values
    assert [r["fingerprint"]["sysctls"]["fs.lease-break-time"] for r in runs] == [str(v) for v in values]
    assert [r["fingerprint"]["pin"] for r in runs] == ["0", "0"]
    assert LEASE_BREAK.read_text() == before
    compared = json.loads(perfline(db, "compare", *(str(r["id"]) for r in runs), "--json").stdout)
    [diffs] = compared["cases"][0]["differences"]
    assert {"key": "sysctl fs.lease-break-time", "base": str(values[0]), "other": str(values[1]),
            "kind": "setting"} in diffs


@pytest.mark.skipif(not LEASE_BREAK.exists(), reason="no fs.lease-break-time sysctl")
def test_ab_sides_fingerprint_their_own_knobs(tmp_path: Path) -> None:
    # Interleaved sides apply their tunables around each step, after the run started.
    before = LEASE_BREAK.read_text()
    a, b = other_values(LEASE_BREAK)
    result = json.loads(
        perfline(tmp_path / "db", "ab", "command", "-p", f"cmd=cat {LEASE_BREAK}",
                 "--a", f"sysctl:fs.lease-break-time={a}", "--b", f"sysctl:fs.lease-break-time={b}",
                 "--b", "pin:0", "--pairs", "2", "--warmup", "0", "--no-monitors", "--json").stdout
    )
    diffs = {d["key"]: (d["base"], d["other"]) for d in result["cases"][0]["differences"][0]}
    assert diffs["sysctl fs.lease-break-time"] == (str(a), str(b))
    assert diffs["pinned to CPUs"] == ("-", "0")
    assert LEASE_BREAK.read_text() == before


STAT_INTERVAL = Path("/proc/sys/vm/stat_interval")
OWN_HOGS = f"pgrep -P $PPID -cfx '{HOG}' || true"  # $PPID: the perfline running the command


@pytest.mark.skipif(not LEASE_BREAK.exists(), reason="no fs.lease-break-time sysctl")
def test_run_options_set_tunables_for_a_benchmark(tmp_path: Path) -> None:
    before = LEASE_BREAK.read_text()
    new, _ = other_values(LEASE_BREAK)
    [run] = json.loads(
        perfline(tmp_path / "db", "run", "command", "-p", f"cmd={OWN_HOGS}", "--sysctl", f"fs.lease-break-time={new}",
                 "--pin", "0", "--load", "1", "--repeat", "2", "--warmup", "0", "--no-monitors", "--json").stdout
    )
    assert run["status"] == "completed"
    assert run["summary"]["command.value"]["mean"] == 1  # one hog beside each repetition
    assert run["tunables"] == {"sysctl": {"fs.lease-break-time": new}, "pin": {"pin": "0"}, "load": {"load": 1}}
    assert run["settings"]["tunables_applied"] == {"sysctl fs.lease-break-time": f"{before.strip()}→{new}", "pin": "0"}
    assert run["fingerprint"]["sysctls"]["fs.lease-break-time"] == str(new)
    assert run["fingerprint"]["pin"] == "0"
    assert LEASE_BREAK.read_text() == before


@pytest.mark.skipif(not (LEASE_BREAK.exists() and STAT_INTERVAL.exists()), reason="sysctls missing")
def test_run_options_override_and_add_to_a_job_files_tunables(tmp_path: Path) -> None:
    before = LEASE_BREAK.read_text(), STAT_INTERVAL.read_text()
    a, b = other_values(LEASE_BREAK)
    interval, _ = other_values(STAT_INTERVAL)
    spec = job(tmp_path, f"tunables: {{sysctl: {{fs.lease-break-time: [{a}, 7]}}}}\nload: 2\n", cmd=f"cat {LEASE_BREAK}")
    runs = json.loads(
        perfline(tmp_path / "db", "run", str(spec), "--sysctl", f"fs.lease-break-time={b}",
                 "--sysctl", f"vm.stat_interval={interval}", "--load", "0", "--json").stdout
    )
    [run] = runs  # the job's axis is replaced by the one value
    assert run["summary"]["command.value"]["mean"] == b
    assert run["tunables"] == {"sysctl": {"fs.lease-break-time": b, "vm.stat_interval": interval}, "load": {"load": 0}}
    assert run["fingerprint"]["sysctls"]["vm.stat_interval"] == str(interval)
    assert (LEASE_BREAK.read_text(), STAT_INTERVAL.read_text()) == before


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--sysctl", "fs/lease-break-time=1", "must be dotted, like vm.swappiness (e.g. --sysctl vm.swappiness=10)"),
        ("--sysctl", "fs.lease-break-time", "expected NAME=VALUE"),
        ("--sysctl", "fs.no-such-knob=1", "no such knob (/proc/sys/fs/no-such-knob does not exist"),
        ("--sysfs", "/sys/../proc/sys/fs/lease-break-time=1", "must be a normalized absolute path under /sys/"),
        ("--sysfs", "/proc/sys/vm/swappiness=10", "is a sysctl: write it with --sysctl as 'vm.swappiness'"),
        ("--sysfs", "/sys/kernel/no-such-knob=1", "no such knob"),
        ("--governor", "fastest", "unknown governor 'fastest': expected one of"),
        ("--pin", "1-0", "CPU range '1-0' runs backwards"),
        ("--pin", "4096", "cannot be used here; usable CPUs: "),
        ("--load", "-1", "load must be a number of CPU hogs (0 or more)"),
    ],
)
def test_bad_run_option_is_a_one_line_error_and_nothing_runs(
    tmp_path: Path, option: str, value: str, says: str
) -> None:
    before = LEASE_BREAK.read_text()
    for what in ("command", str(job(tmp_path, "", cmd="echo 1"))):
        proc = perfline(tmp_path / "db", "run", what, *(["-p", "cmd=echo 1"] if what == "command" else []),
                        option, value, check=False)
        assert proc.returncode == 2, proc.stderr
        [line] = proc.stderr.strip().splitlines()
        assert line.startswith(f"error: command line: {option}") and says in line, line
        assert not (tmp_path / "db").exists()  # no store opened, nothing run
    assert LEASE_BREAK.read_text() == before
