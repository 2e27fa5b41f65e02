"""`perfline tune`: the items on a captured tree of a machine with cpufreq and turbo (this
VM has neither), the dry run and the job key on this machine, and the fingerprint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfline.jobs import load_job
from perfline.records.job import JobError
from perfline.system import tuning
from perfline.system.journal import Journal
from perfline.system.kernel_state import KernelState

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="kernel state is writable only by root")


def machine(root: Path, irq_on: str = "0-3") -> tuning.Places:
    """A 4-CPU machine's files as the kernel lays them out: two cpufreq policies
    (powersave, the minimum at 800 MHz), intel_pstate turbo on, three interrupts."""
    cpu, proc = root / "sys/devices/system/cpu", root / "proc"
    for n, cpus in ((0, "0 1"), (2, "2 3")):
        policy = cpu / f"cpufreq/policy{n}"
        policy.mkdir(parents=True)
        for name, value in (("affected_cpus", cpus), ("scaling_governor", "powersave"),
                            ("scaling_available_governors", "performance powersave"),
                            ("cpuinfo_max_freq", "3500000"), ("scaling_min_freq", "800000")):
            (policy / name).write_text(value + "\n")
    (cpu / "intel_pstate").mkdir()
    (cpu / "intel_pstate/no_turbo").write_text("0\n")
    (cpu / "online").write_text("0-3\n")
    (cpu / "isolated").write_text("\n")
    for irq in (1, 9, 24):
        (proc / f"irq/{irq}").mkdir(parents=True)
        (proc / f"irq/{irq}/smp_affinity_list").write_text(irq_on + "\n")
    (proc / "irq/default_smp_affinity").write_text("f\n")
    (proc / "sys/kernel").mkdir(parents=True)
    (proc / "sys/kernel/perf_event_max_sample_rate").write_text("100000\n")
    (proc / "sys/kernel/nmi_watchdog").write_text("1\n")
    (proc / "cmdline").write_text("root=/dev/sda rcu_nocbs=2-3\n")
    return tuning.Places(cpu=cpu, proc=proc)


def by_name(items: list[tuning.Item]) -> dict[str, tuning.Item]:
    return {item.name: item for item in items}


def test_a_tune_sets_every_item_and_its_undo_puts_each_back(tmp_path: Path) -> None:
    places = machine(tmp_path / "m")
    before = {str(p): p.read_text() for p in (tmp_path / "m").rglob("*") if p.is_file()}
    items = by_name(tuning.plan({2, 3}, places))
    assert items["governor"].state == items["min freq"].state == items["turbo"].state == tuning.UNTUNED
    assert [str(v) for _, v in items["irq affinity"].changes] == ["0-1"] * 3 + ["3"]  # and the default mask
    assert items["isolcpus"].state == tuning.UNTUNED and "isolcpus=2-3" in items["isolcpus"].detail
    assert items["rcu_nocbs"].state == tuning.TUNED and items["nohz_full"].state == tuning.UNAVAILABLE
    # The governor of the policy of CPUs 0-1 is not the benchmark's: left alone.
    assert [p.parent.name for p, _ in items["governor"].changes] == ["policy2"]

    kernel = KernelState(Journal(tmp_path / "state", os.getpid(), "boot"))
    entries, refused = tuning.apply(list(items.values()), kernel)
    assert refused == []
    after = by_name(tuning.plan({2, 3}, places))
    assert {name: item.state for name, item in after.items() if not item.check_only} == {
        "governor": "tuned", "min freq": "tuned", "turbo": "tuned", "irq affinity": "tuned",
        "irqbalance": "tuned", "perf sample rate": "tuned", "nmi watchdog": "tuned"}
    assert (places.cpu / "cpufreq/policy2/scaling_min_freq").read_text() == "3500000"
    assert tuning.states(list(after.values()))["irq affinity"].startswith("tuned: 0 of 3")

    assert kernel.restore(entries) == []
    assert {str(p): p.read_text().strip() for p in (tmp_path / "m").rglob("*") if p.is_file()} == {
        k: v.strip() for k, v in before.items()}
    assert not list((tmp_path / "state").glob("journal.*"))


def test_a_kept_tune_outlives_its_journal_and_reset_undoes_it(tmp_path: Path) -> None:
    places = machine(tmp_path / "m")
    state = tmp_path / "state"
    kernel = KernelState(Journal(state, os.getpid(), "boot"))
    entries, _ = tuning.apply(tuning.plan({3}, places), kernel)
    tuning.keep(state, "boot", entries, kernel)
    # Out of the process's journal (a later command would have restored it) ...
    assert not list(state.glob("journal.*")) and len(tuning.kept_entries(state, "boot")) == len(entries)
    assert (places.proc / "sys/kernel/nmi_watchdog").read_text() == "0"
    # ... and gone after a reboot, whose boot reset the values.
    assert tuning.kept_entries(tmp_path / "other", "boot") == []
    restored, failed = tuning.reset(state, "boot")
    assert failed == [] and len(restored) == len(entries)
    assert (places.proc / "sys/kernel/nmi_watchdog").read_text() == "1"
    assert (places.cpu / "cpufreq/policy2/scaling_governor").read_text() == "powersave"
    assert not (state / tuning.TUNED_FILE).exists()


def test_what_is_tuned_already_is_not_journaled_again(tmp_path: Path) -> None:
    """A run's tune on a machine `perfline tune` tuned changes nothing, so its reset
    leaves the machine tuned."""
    places = machine(tmp_path / "m", irq_on="0")
    for policy in ("policy0", "policy2"):
        (places.cpu / "cpufreq" / policy / "scaling_governor").write_text("performance")
    items = by_name(tuning.plan({2, 3}, places))
    assert items["governor"].changes == () and items["irq affinity"].changes == (
        (places.proc / "irq/default_smp_affinity", "3"),)


def test_without_benchmark_cpus_interrupts_stay_and_the_sampling_rate_can_be_kept(tmp_path: Path) -> None:
    places = machine(tmp_path / "m")
    items = by_name(tuning.plan(set(), places, keep_sampling=True))
    assert items["irq affinity"].state == tuning.UNAVAILABLE and "--cpus" in items["irq affinity"].detail
    assert items["perf sample rate"].state == tuning.UNAVAILABLE and "perf-profile" in items["perf sample rate"].detail
    every = by_name(tuning.plan({0, 1, 2, 3}, places))
    assert "every online CPU" in every["irq affinity"].detail


def perfline(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFLINE_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), *args],
                          capture_output=True, text=True, timeout=300, env=env, check=False)


def test_dry_run_changes_nothing_and_says_why_the_rest_cannot_be(tmp_path: Path) -> None:
    before = {str(p): p.read_text() for p in Path("/proc/irq").glob("*/smp_affinity_list")}
    proc = perfline(tmp_path, "tune", "--dry-run", "--cpus", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    items = {i["item"]: i for i in json.loads(proc.stdout)["items"]}
    assert {str(p): p.read_text() for p in Path("/proc/irq").glob("*/smp_affinity_list")} == before
    assert not (tmp_path / "state").exists()
    assert len(items) == 10
    for item in items.values():
        assert item["state"] in ("tuned", "untuned", "unavailable")
        assert item["detail"], item  # every item says what it is or why it cannot be
        assert (item["state"] == "untuned" and not item["check_only"]) or item["changes"] == []
    if not list(Path("/sys/devices/system/cpu/cpufreq").glob("policy*")):
        assert items["governor"]["state"] == "unavailable" and "no cpufreq" in items["governor"]["detail"]
    bad = perfline(tmp_path, "tune", "--cpus", "7-x")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --cpus")


def test_a_job_says_tune_true_or_false(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: command\nparams:\n  cmd: echo 1\ntune: true\n")
    assert load_job(job).tune
    job.write_text("benchmark: command\nparams:\n  cmd: echo 1\ntune: 3\n")
    with pytest.raises(JobError, match=r"job.yaml:4: tune must be true or false"):
        load_job(job)


@needs_root
def test_compare_shows_a_tuned_run_beside_an_untuned_one(tmp_path: Path) -> None:
    """The fingerprint records the tuning; the machine is as it was after the run."""
    rate = Path("/proc/sys/kernel/perf_event_max_sample_rate")
    before = rate.read_text()
    if before.strip() == "1":
        pytest.skip("the machine is tuned already (perfline tune): nothing would differ")
    args = ("run", "command", "-p", "cmd=echo 1", "--repeat", "2", "--warmup", "0", "--no-monitors", "--pin", "1")
    assert perfline(tmp_path, *args).returncode == 0
    tuned = perfline(tmp_path, *args, "--tune")
    assert tuned.returncode == 0, tuned.stderr
    assert rate.read_text() == before
    compared = perfline(tmp_path, "compare", "1", "2", "--json")
    assert compared.returncode in (0, 1), compared.stderr
    differences = {d["key"]: d for d in json.loads(compared.stdout)["cases"][0]["differences"][0]}
    assert differences["tune perf sample rate"]["base"] == f"untuned: {before.strip()}"
    assert differences["tune perf sample rate"]["other"] == "tuned: 1"


def test_a_tuned_case_travels_to_a_fleet_machine_tuned(tmp_path: Path) -> None:
    from perfline.jobs import expand
    from perfline.records.job import case_from_json, case_to_json

    job = tmp_path / "job.yaml"
    job.write_text("benchmark: command\nparams:\n  cmd: echo 1\ntune: true\n")
    [case] = expand(load_job(job))
    assert case.tune and case_from_json(json.loads(json.dumps(case_to_json(case)))) == case
    assert "tune" not in case.key  # a tuned and an untuned run are the same case


def test_an_empty_nohz_full_mask_printed_as_null_is_not_set(tmp_path: Path) -> None:
    # Debian 12's 6.1 kernel (NO_HZ_FULL built in, not booted with it) prints "(null)";
    # every run's fingerprint reads it (the kexec lab guest's health job died of it).
    places = machine(tmp_path)
    (places.cpu / "nohz_full").write_text("(null)\n")
    item = by_name(tuning.plan({2, 3}, places))["nohz_full"]
    assert item.state == tuning.UNTUNED and item.detail.startswith("not set")
