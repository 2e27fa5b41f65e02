"""The qemu target for real: Debian cloud kernels from apt, booted under QEMU.

The kernels are downloaded once into a fixed cache directory and kept there, so a
re-run boots without downloading. Tests marked `vm` boot guests (TCG here, where
/dev/kvm exists but cannot run a guest); the others check the pieces without one.
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from perfline.analysis.comparison import Side
from perfline.jobs import JobError, expand, load_job
from perfline.records.fingerprint import differences, flatten
from perfline.store import RunDetail, RunInfo, Store
from perfline.system.native import CHECKOUT, native_binary
from perfline.targets import initramfs, kernels
from perfline.targets.kvm_memo import KvmMemo
from perfline.targets.qemu import BOOT_TIMEOUT_S, GuestFailed, Vm, VmConfig, kvm_usable

# Fixed, outside the checkout and the user's own cache: downloads survive between runs.
TEST_CACHE = Path(os.environ.get("PERFLINE_TEST_CACHE", Path.home() / ".cache" / "perfline-tests"))
# Meta-packages, so the tests follow Debian 12's current point releases.
KERNEL_61 = ("debian-6.1", "linux-image-cloud-amd64")
KERNEL_612 = ("debian-6.12", "linux-image-6.12-cloud-amd64")

vm = pytest.mark.vm


@pytest.fixture(scope="module", autouse=True)
def cache() -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(kernels.CACHE_ENV, str(TEST_CACHE))
        yield TEST_CACHE


@pytest.fixture(scope="module", autouse=True)
def built_helpers() -> None:
    if not (CHECKOUT / "native" / "build" / "rcu_gp").exists():
        subprocess.run(["make", "native"], cwd=CHECKOUT, check=True)


def perfline(db: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "perfline", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, kernels.CACHE_ENV: str(TEST_CACHE)},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"perfline {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def registered(name: str, package: str, tmp: Path) -> kernels.Kernel:
    """The kernel, added through the CLI the first time (apt download), cached after."""
    proc = perfline(tmp / "db", "kernels", "add-deb", package, "--name", name, check=False)
    if "apt knows no package" in proc.stderr:  # a machine whose apt lists were never fetched
        subprocess.run(["apt-get", "update", "-q"], check=True, capture_output=True)
        proc = perfline(tmp / "db", "kernels", "add-deb", package, "--name", name, check=False)
    assert proc.returncode == 0, proc.stderr
    return kernels.get_kernel(name)


@pytest.fixture(scope="module")
def debian_61(tmp_path_factory: pytest.TempPathFactory) -> kernels.Kernel:
    return registered(*KERNEL_61, tmp_path_factory.mktemp("kernels"))


def run_json(db: Path, *args: str, check: bool = True) -> dict:
    proc = perfline(db, "run", *args, "--warmup", "0", "--no-monitors", "--json", check=check)
    [run] = json.loads(proc.stdout)
    return run


# -- without a VM ---------------------------------------------------------------------


def test_bzimage_release_is_read_from_the_setup_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "cache"))
    image = bytearray(0x1000)
    image[0x202:0x206] = b"HdrS"
    image[0x20E:0x210] = (0x600).to_bytes(2, "little")
    image[0x800:0x830] = b"6.9.0-test (me@host) #1 SMP\0".ljust(0x30, b"\0")
    path = tmp_path / "bzImage"
    path.write_bytes(bytes(image))
    assert kernels.image_release(path) == "6.9.0-test"
    (tmp_path / "config-6.9.0-test").write_text("CONFIG_X=y\n")
    kernel = kernels.add_image(path, "mine")
    assert (kernel.release, kernel.config()) == ("6.9.0-test", "CONFIG_X=y\n")
    assert kernels.add_image(path, "mine") == kernel  # the same image again: a no-op
    path.write_bytes(bytes(image) + b"changed")
    with pytest.raises(kernels.KernelError, match="already registered"):
        kernels.add_image(path, "mine")
    (tmp_path / "vmlinux").write_bytes(b"\x7fELF" + bytes(0x400))
    with pytest.raises(kernels.KernelError, match="not an x86 bzImage"):
        kernels.add_image(tmp_path / "vmlinux", "elf")


@vm
def test_unknown_kernel_suggests_registered_ones(debian_61: kernels.Kernel) -> None:
    with pytest.raises(kernels.KernelError, match="did you mean"):
        kernels.get_kernel("debian-6.l")


def test_initramfs_holds_agent_busybox_and_tools_and_is_cached(tmp_path: Path) -> None:
    helper = native_binary("rcu_gp")
    files = initramfs.contents([helper])
    assert files["init"].startswith(b"#!/bin/busybox sh")
    assert "bin/busybox" in files
    assert str(helper).lstrip("/") in files
    assert any(name.endswith("/libc.so.6") for name in files)  # resolved with ldd

    first = initramfs.build([helper], tmp_path)
    mtime = first.stat().st_mtime_ns
    assert initramfs.build([helper], tmp_path) == first
    assert first.stat().st_mtime_ns == mtime  # not rebuilt
    listing = subprocess.run(
        ["busybox", "cpio", "-t"], input=gzip.decompress(first.read_bytes()),
        capture_output=True, check=True,
    ).stdout.decode().split()
    assert {"init", "bin/busybox", "proc", "dev", str(helper).lstrip("/")} <= set(listing)

    other = tmp_path / "tool"
    other.write_bytes(helper.read_bytes() + b"\0")  # another input: another image
    other.chmod(0o755)
    assert initramfs.build([other], tmp_path) != first


def test_kvm_failure_is_remembered_for_its_host_boot_only(tmp_path: Path) -> None:
    path = tmp_path / "state" / "kvm-failed.json"
    memo = KvmMemo(path, "boot-1")
    assert memo.failure() is None
    memo.remember("QEMU exited: KVM internal error")
    known = memo.failure()
    assert known is not None and known.startswith("QEMU exited: KVM internal error (")
    assert str(path) in known  # says how to try KVM again without a reboot
    assert KvmMemo(path, "boot-2").failure() is None  # the host rebooted: KVM is tried again
    path.write_text("{not json")
    assert memo.failure() is None


def test_compare_treats_another_accelerator_as_another_machine() -> None:
    base = flatten({"target": "qemu", "vm": {"accel": "kvm"}})
    other = flatten({"target": "qemu", "vm": {"accel": "tcg"}})
    [difference] = differences(base, other)
    assert (difference.key, difference.kind) == ("vm accel", "machine")


JOB_ERRORS = [
    ("benchmark: rcu-gp\ntarget: qemu\nkernel: no-such\n", 3, "unknown kernel 'no-such'"),
    ("benchmark: rcu-gp\nkernel: debian-6.1\n", 2, "kernel applies only to `target: qemu`"),
    ("benchmark: cyclictest\ntarget: qemu\nkernel: debian-6.1\n", 2, "cannot run with target qemu"),
    (
        "benchmark: rcu-gp\ntarget: qemu\nkernel: debian-6.1\ntunables:\n  sysctl: {vm.swappiness: 1}\n",
        5,
        "would be applied on this host",
    ),
    ("benchmark: rcu-gp\ntarget: qemu\nkernel: debian-6.1\nvm_cpus: 0\n", 4, "vm_cpus must be"),
    ("benchmark: rcu-gp\ntarget: qemu\nkernel: debian-6.1\naccel: hvf\n", 4, "accel must be one of"),
]


@vm
@pytest.mark.parametrize(("text", "line", "message"), JOB_ERRORS)
def test_qemu_job_errors_name_the_line(
    debian_61: kernels.Kernel, tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(JobError) as info:
        load_job(path)
    assert info.value.line == line, str(info.value)
    assert message in info.value.message


@vm
def test_qemu_job_cmdline_is_a_matrix_axis(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "benchmark: rcu-gp\ntarget: qemu\nkernel: debian-6.1\nvm_memory: 512\n"
        "cmdline: ['', 'rcutree.jiffies_till_first_fqs=0']\n"
    )
    job = load_job(path)
    assert job.vm is not None and (job.vm.kernel, job.vm.memory_mb, job.vm.cpus) == ("debian-6.1", 512, 2)
    cases = expand(job)
    assert [c.cmdline for c in expand(job)] == ["", "rcutree.jiffies_till_first_fqs=0"]
    cases = expand(job)
    assert "debian" not in cases[1].key and "jiffies_till_first_fqs" in cases[1].key


# -- booting guests -------------------------------------------------------------------


@vm
def test_add_deb_downloads_once(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    assert debian_61.release.endswith("-cloud-amd64")
    assert kernels.image_release(debian_61.image) == debian_61.release
    assert debian_61.meta.source.startswith("deb:linux-image-cloud-amd64 -> linux-image-")
    assert "CONFIG_MEMBARRIER=y" in (debian_61.config() or "")
    again = perfline(tmp_path / "db", "kernels", "add-deb", KERNEL_61[1], "--name", KERNEL_61[0])
    assert "apt-get download" not in again.stderr
    listed = json.loads(perfline(tmp_path / "db", "kernels", "list", "--json").stdout)
    [entry] = [k for k in listed if k["name"] == "debian-6.1"]
    assert entry["release"] == debian_61.release and entry["image"] == str(debian_61.image)


@vm
def test_rcu_gp_runs_in_the_guest_with_its_fingerprint(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    run = run_json(
        tmp_path / "db", "rcu-gp", "-p", "iterations=3", "--repeat", "2",
        "--target", "qemu", "--kernel", "debian-6.1", "--cmdline", "rcutree.jiffies_till_first_fqs=1",
    )
    assert run["status"] == "completed", (run["error"], run["output_tail"])
    values = [s for s in run["samples"] if s["metric"] == "rcu-gp.ms_per_gp"]
    assert len(values) == 2 and all(s["value"] > 0 for s in values)
    fingerprint, settings = run["fingerprint"], run["settings"]
    assert fingerprint["kernel_release"] == debian_61.release != os.uname().release
    assert fingerprint["target"] == "qemu"
    assert "rcutree.jiffies_till_first_fqs=1" in fingerprint["cmdline"]
    assert fingerprint["config_hash"] is not None  # from the registry: no /proc/config.gz
    assert (fingerprint["cpu_count"], fingerprint["memory_bytes"]) == (2, 1024 * 2**20)
    assert 0 < int(fingerprint["vm"]["guest_memtotal_bytes"]) < 1024 * 2**20
    accel = fingerprint["vm"]["accel"]
    assert settings["vm_accel"] == accel and settings["vm_kernel"] == "debian-6.1"
    assert 0 < settings["vm_boot_s"] < 60
    if kvm_usable() and accel == "tcg":  # auto fell back, and said so
        assert "KVM failed" in " ".join(settings["vm_warnings"])


@vm
def test_command_runs_packed_tools_in_the_guest(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    helper = native_binary("rcu_gp")
    run = run_json(
        tmp_path / "db", "command", "-p", f"cmd={helper} --iterations=1 >/dev/null && nproc",
        "--repeat", "1", "--target", "qemu", "--kernel", "debian-6.1", "--vm-cpus", "1",
        "--accel", "tcg", check=False,
    )
    # One vCPU: the helper refuses (no grace period to wait for), which proves it ran there.
    assert run["status"] == "failed"
    assert "one online CPU" in run["output_tail"]
    run = run_json(
        tmp_path / "db", "command", "-p", "cmd=nproc", "--repeat", "1",
        "--target", "qemu", "--kernel", "debian-6.1", "--vm-cpus", "1", "--accel", "tcg",
    )
    assert [s["value"] for s in run["samples"]] == [1.0]
    assert run["fingerprint"]["cpu_count"] == 1


@vm
def test_panicking_guest_fails_with_console_tail(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    # init= names the root file system's init; with an initramfs it is rdinit= that
    # decides, and a missing one makes the kernel look for a root device and panic.
    started = time.monotonic()
    run = run_json(
        tmp_path / "db", "rcu-gp", "--repeat", "1", "--target", "qemu", "--kernel", "debian-6.1",
        "--accel", "tcg", "--cmdline", "rdinit=/nonexistent", check=False,
    )
    # Seen as QEMU exits on the panic (panic=-1), not waited out: two boots that each ran
    # to their deadline would take 2 x BOOT_TIMEOUT_S. Two TCG boots to the panic took
    # 28 s at a load of 8 (14 s each); a bound of 60 s was one slow spell from failing.
    assert time.monotonic() - started < 2 * BOOT_TIMEOUT_S
    assert run["status"] == "failed"
    # A panic at boot gets one more boot (rare TCG panics on a loaded host); this one repeats.
    assert "panicked" in run["error"] and "on two boots" in run["error"]
    assert "Kernel panic - not syncing" in run["output_tail"]


def test_panic_message_names_the_oops_before_it(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    vm_ = Vm(VmConfig(debian_61, tmp_path / "initramfs", accel="tcg"), tmp_path)
    vm_.console_log.write_text(
        "[    1.20] BUG: kernel NULL pointer dereference, address: 0000000000000008\r\n"
        "[    1.21] #PF: supervisor read access in kernel mode\r\n"
        "[    1.22] Oops: 0000 [#1] PREEMPT SMP NOPTI\r\n"
        "[    1.23] RIP: 0010:e1000_clean+0x1c/0x240 [e1000]\r\n"
        "[    1.30] Kernel panic - not syncing: Fatal exception in interrupt\r\n"
    )
    assert vm_._panic() == (
        "Fatal exception in interrupt (BUG: kernel NULL pointer dereference, address: "
        "0000000000000008; RIP: 0010:e1000_clean+0x1c/0x240 [e1000])"
    )
    vm_.console_log.write_text("[    2.5] Kernel panic - not syncing: VFS: Unable to mount root fs\r\n")
    assert vm_._panic() == "VFS: Unable to mount root fs"


@vm
def test_hung_guest_is_killed_at_its_deadline(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    image = initramfs.build([])
    # panic=0: the kernel hangs after panicking instead of exiting.
    config = VmConfig(debian_61, image, "rdinit=/nonexistent panic=0", cpus=1, memory_mb=256, accel="tcg")
    vm_ = Vm(config, tmp_path, boot_timeout=15)
    started = time.monotonic()
    with pytest.raises(GuestFailed, match="VM killed after its deadline") as info, vm_:
        pass
    assert 15 <= time.monotonic() - started < 30
    assert "Kernel panic" in info.value.console_tail
    assert vm_._proc is None  # killed and reaped

    run = run_json(
        tmp_path / "db", "command", "-p", "cmd=sleep 600", "-p", "timeout=1", "--repeat", "1",
        "--target", "qemu", "--kernel", "debian-6.1", "--accel", "tcg", check=False,
    )
    assert run["status"] == "failed"
    assert "VM killed after its deadline" in run["error"]


@vm
def test_two_debian_kernels_compared_end_to_end(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    registered(*KERNEL_612, tmp_path)
    db = tmp_path / "db"
    for name in ("debian-6.1", "debian-6.12"):
        run = run_json(
            db, "rcu-gp", "-p", "iterations=2", "--repeat", "5", "--target", "qemu",
            "--kernel", name, "--label", name,
        )
        assert run["status"] == "completed", (run["error"], run["output_tail"])
    compared = json.loads(
        perfline(db, "compare", "--label", "debian-6.1", "--label", "debian-6.12", "--json").stdout
    )
    # The form: the runs found by the kernel they booted, not by a label.
    by_kernel = json.loads(
        perfline(db, "compare", "--kernel", "debian-6.1", "--kernel", "debian-6.12", "--json").stdout
    )
    assert [s["runs"] for s in by_kernel["cases"][0]["sides"]] == [s["runs"] for s in compared["cases"][0]["sides"]]
    [case] = compared["cases"]
    [row] = [m for m in case["metrics"] if m["metric"] == "rcu-gp.ms_per_gp"]
    assert row["base"]["n"] == 5 and row["others"][0]["n"] == 5
    assert not case["cross_machine"]  # same host, same accelerator
    differing = {d["key"] for d in case["differences"][0]}
    assert {"kernel_release", "kernel_version", "setting vm_kernel"} <= differing


@vm
# rcu-gp keeps each side's VM up for the whole A/B; tbench, exclusive (its server's fixed
# port), boots a VM at every step, and its runs must still carry the guest's fingerprint.
@pytest.mark.parametrize(("benchmark", "param", "metric"), [
    ("rcu-gp", "iterations=2", "rcu-gp.ms_per_gp"),
    ("tbench", "duration=2", "tbench.throughput"),
])
def test_ab_boots_each_sides_kernel_interleaved(
    debian_61: kernels.Kernel, tmp_path: Path, benchmark: str, param: str, metric: str
) -> None:
    debian_612 = registered(*KERNEL_612, tmp_path)
    db = tmp_path / "db"
    proc = perfline(
        db, "ab", benchmark, "-p", param, "--target", "qemu", "--accel", "tcg",
        "--a", "kernel:debian-6.1", "--b", "kernel:debian-6.12", "--pairs", "2",
        "--warmup", "0", "--no-monitors", "--json",
    )  # fmt: skip
    [case] = json.loads(proc.stdout)["cases"]
    [row] = [m for m in case["metrics"] if m["metric"] == metric]
    assert row["base"]["n"] == 2 and row["others"][0]["n"] == 2
    assert "change_pct" in row["others"][0]
    assert {"kernel_release", "setting vm_kernel"} <= {d["key"] for d in case["differences"][0]}
    run_a, run_b = (side["runs"][0] for side in case["sides"])
    for run_id, kernel in ((run_a, debian_61), (run_b, debian_612)):
        run = json.loads(perfline(db, "show", str(run_id), "--json").stdout)
        assert run["status"] == "completed", (run["error"], run["output_tail"])
        assert run["settings"]["vm_kernel"] == kernel.name
        assert run["fingerprint"]["kernel_release"] == kernel.release
        assert run["fingerprint"]["target"] == "qemu" and run["fingerprint"]["vm"]["guest_cpu_model"]
    with sqlite3.connect(db) as connection:
        order = connection.execute(
            "SELECT run_id FROM samples WHERE source='benchmark' AND metric=? ORDER BY taken_at, id", (metric,)
        ).fetchall()
    assert [r for (r,) in order] == [run_a, run_b, run_b, run_a]  # AB, BA


@vm
def test_auto_goes_to_tcg_at_once_after_kvm_failed_on_this_host_boot(
    debian_61: kernels.Kernel, tmp_path: Path
) -> None:
    if not kvm_usable():
        pytest.skip("/dev/kvm does not open here: auto never tries KVM")
    memo = KvmMemo(tmp_path / "kvm-failed.json", "fake-boot-id")
    config = VmConfig(debian_61, initramfs.build([]), cpus=1, memory_mb=256, accel="auto")
    with Vm(config, tmp_path, kvm_memo=memo) as first:
        if first.accel == "kvm":
            assert memo.failure() is None
            pytest.skip("KVM works on this host: nothing to remember")
    [tried] = first.warnings
    assert memo.failure() is not None
    with Vm(config, tmp_path, kvm_memo=memo) as second:
        assert second.accel == "tcg"
        [warning] = second.warnings
    # The same warning, saying it was remembered: this boot did not try KVM.
    assert warning.startswith(tried + " (on an earlier boot") and str(memo.path) in warning
    with Vm(config, tmp_path, kvm_memo=KvmMemo(memo.path, "another-boot")) as third:
        [fresh] = third.warnings  # another host boot: KVM tried again, and failed again here
    assert fresh.startswith("KVM failed, fell back to TCG (slower): ") and "earlier boot" not in fresh


@vm
def test_vm_dies_with_a_sigkilled_perfline(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "run", "command",
            "-p", "cmd=sleep 600", "--repeat", "1", "--warmup", "0", "--no-monitors",
            "--target", "qemu", "--kernel", "debian-6.1", "--accel", "tcg",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, kernels.CACHE_ENV: str(TEST_CACHE)},
    )  # fmt: skip
    deadline = time.monotonic() + 60
    qemu: list[str] = []
    while not qemu:
        assert time.monotonic() < deadline and proc.poll() is None, "no QEMU started"
        time.sleep(0.1)
        found = subprocess.run(["pgrep", "-P", str(proc.pid), "qemu"], capture_output=True, text=True)
        qemu = found.stdout.split()
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{qemu[0]}").exists():
        assert time.monotonic() < deadline, "QEMU outlived the perfline that started it"
        time.sleep(0.1)


def test_compare_flags_sides_that_mix_accelerators_even_alike() -> None:
    """Both labels' runs ran partly under KVM and partly under TCG: the same text on both
    sides, and still two machines inside each side."""
    def run(accel: str) -> RunDetail:
        info = RunInfo(1, "job", "rcu-gp", "default", "qemu", "6.1", "host", None, None, "completed", 1, 1,
                       datetime.now(UTC), None)
        fingerprint = {"target": "qemu", "vm": {"accel": accel}}
        return RunDetail(info, {}, {}, [], {}, fingerprint, None, None, [])

    sides = [Side(name, [run("kvm"), run("tcg")]) for name in ("a", "b")]
    [difference] = differences(sides[0].description(), sides[1].description())
    assert (difference.key, difference.kind) == ("vm accel", "machine")
    assert difference.base == difference.other == "mixed: kvm | tcg"


@vm
def test_monitors_read_the_guests_files(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    """A case in a VM is watched from inside: its meminfo is the guest's 384 MiB, not this
    host's gigabytes, and its per-CPU rows are the guest's one CPU, not this host's two."""
    proc = perfline(
        tmp_path / "db", "run", "command", "-p", "cmd=dd if=/dev/zero of=/dev/null bs=64k count=20000 2>/dev/null; echo 1",
        "--repeat", "2", "--warmup", "0", "--target", "qemu", "--kernel", "debian-6.1", "--vm-cpus", "1",
        "--vm-memory", "384", "--accel", "tcg", "--json",
        *(arg for name in ("proc-stat", "meminfo", "interrupts", "softirqs", "schedstat", "perf-stat")
          for arg in ("--monitor", name)),
    )
    [run] = json.loads(proc.stdout)
    assert run["status"] == "completed", run["error"]
    metrics = {s["metric"] for s in run["samples"]}
    summary = run["summary"]
    assert 0 < summary["meminfo.memavailable"]["mean"] < 384
    assert "interrupts.cpu0" in metrics and "interrupts.cpu1" not in metrics
    assert summary["interrupts.total"]["mean"] > 0 and summary["softirqs.timer"]["mean"] > 0
    assert "schedstat.cpu0.wait_ms" in metrics and "schedstat.cpu1.wait_ms" not in metrics
    # dd keeps the guest's one CPU busy: its /proc/stat says so whatever this host does.
    assert summary["proc-stat.idle_pct"]["mean"] < 50
    # perf's events count this host's CPUs, which would be the emulator's work.
    assert "perf-stat: measures this host, not the guest" in proc.stderr
    assert not any(m.startswith("perf-stat.") for m in metrics)


def busy_loops(count: int) -> str:
    """`count` busy shells for a second, children of the benchmark's shell, killed before
    the repetition ends. In a one-vCPU guest they all share its one CPU."""
    start = "".join(f"(while :; do :; done) & p{i}=$!; " for i in range(count))
    return f"{start}sleep 1; kill {' '.join(f'$p{i}' for i in range(count))}; echo 1"


def schedstat_in_guest(db: Path, cmd: str, *extra: str) -> tuple[dict, str]:
    proc = perfline(
        db, "run", "command", "-p", f"cmd={cmd}", "--repeat", "2", "--warmup", "0", "--target", "qemu",
        "--kernel", "debian-6.1", "--vm-cpus", "1", "--accel", "tcg", "--monitor", "schedstat", "--json", *extra,
    )
    [run] = json.loads(proc.stdout)
    assert run["status"] == "completed", run["error"]
    return run, proc.stderr


@vm
def test_schedstat_sees_the_benchmarks_own_tasks_wait_for_a_cpu_in_a_guest(
    debian_61: kernels.Kernel, tmp_path: Path
) -> None:
    """The command and the loops it forks join the guest's task group at spawn: three on
    the guest's one CPU wait most of the time (~80%, they run for 1 s of a repetition's
    ~1.25 s), a lone one about never (~1-2% measured), whatever this host's load does to
    the vCPU (the guest sees a preempted vCPU as its task still running)."""
    values: dict[int, dict[str, list[float]]] = {}
    for count in (3, 1):
        run, _ = schedstat_in_guest(tmp_path / "db", busy_loops(count))
        values[count] = {}
        for sample in run["samples"]:
            values[count].setdefault(sample["metric"], []).append(sample["value"])
    three, lone = values[3]["schedstat.task_wait_pct"], values[1]["schedstat.task_wait_pct"]
    assert len(three) == len(lone) == 2
    assert min(three) > 50 and max(lone) < 20, (three, lone)
    # The loops' CPU time is the group's: about one CPU's worth for the second they ran.
    for count in (3, 1):
        assert all(40 < v < 110 for v in values[count]["schedstat.task_cpu_pct"]), values[count]


@vm
def test_a_guest_booted_with_psi_0_says_the_task_wait_is_not_measured(
    debian_61: kernels.Kernel, tmp_path: Path
) -> None:
    run, stderr = schedstat_in_guest(tmp_path / "db", busy_loops(1), "--cmdline", "psi=0")
    reason = ("schedstat: the CPU wait of the benchmark's own tasks is not measured: the guest's cgroups "
              "have no cpu.pressure: a kernel without CONFIG_PSI, or booted with psi=0")
    assert [line for line in stderr.splitlines() if "monitor schedstat" in line] == [f"warning: monitor {reason}"]
    assert run["settings"]["monitors_partial"] == [reason]
    metrics = {s["metric"] for s in run["samples"]}
    assert "schedstat.cpu0.wait_ms" in metrics and not any(m.startswith("schedstat.task_") for m in metrics)


# In a one-CPU guest, each repetition: loopback pings (netdev, NET_RX), a 32 MiB file
# kept in the initramfs's tmpfs (meminfo Shmem grows by it each repetition), 5000 new
# files (dentry and inode slab caches), and two busy loops on the one CPU (CPU pressure).
GUEST_WORKLOAD = (
    "ip link set lo up; ping -c 100 -i 0.005 127.0.0.1 >/dev/null; "
    "dd if=/dev/zero of=/tmp/keep.$$ bs=1M count=32 2>/dev/null; "
    "mkdir /tmp/d.$$ && cd /tmp/d.$$ && i=0; while [ $i -lt 5000 ]; do : > f$i; i=$((i+1)); done; "
    "(while :; do :; done) & a=$!; (while :; do :; done) & b=$!; sleep 1; kill $a $b; echo 1"
)


@pytest.mark.slow
@vm
def test_every_file_monitor_moves_with_its_workload_in_a_guest(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    monitors = ("proc-stat", "vmstat", "softirqs", "interrupts", "meminfo", "psi", "netdev", "diskstats",
                "schedstat", "cpufreq", "slabinfo", "numastat", "pace")
    proc = perfline(
        tmp_path / "db", "run", "command", "-p", f"cmd={GUEST_WORKLOAD}", "--repeat", "3", "--warmup", "0",
        "--target", "qemu", "--kernel", "debian-6.1", "--vm-cpus", "1", "--vm-memory", "512", "--accel", "tcg",
        "--json", *(arg for name in monitors for arg in ("--monitor", name)),
    )
    [run] = json.loads(proc.stdout)
    assert run["status"] == "completed", run["error"]
    by_rep: dict[str, list[float]] = {}
    for sample in sorted(run["samples"], key=lambda s: s["repetition"]):
        by_rep.setdefault(sample["metric"], []).append(sample["value"])
    mean = {metric: sum(values) / len(values) for metric, values in by_rep.items()}
    assert mean["netdev.rx_packets"] > 20 and mean["softirqs.net_rx"] > 5
    shmem = by_rep["meminfo.shmem"]
    assert all(25 < later - earlier < 40 for earlier, later in zip(shmem, shmem[1:], strict=False)), shmem
    assert any(m.startswith("slabinfo.") and m.endswith(".active_kib") for m in mean), sorted(mean)
    assert mean["psi.cpu_some_pct"] > 10
    assert mean["proc-stat.idle_pct"] < 50
    for present in ("diskstats.reads", "schedstat.wait_ms", "interrupts.cpu0", "numastat.numa_hit",
                    "vmstat.pgfault", "pace.slowdown"):
        assert present in mean, present
    # No cpufreq in a TCG guest: said, naming the guest, and the run goes on.
    assert "cpufreq: no /sys/devices/system/cpu/cpu*/cpufreq on the guest" in proc.stderr


@vm
def test_tbench_runs_client_and_server_in_the_guest(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    """tbench and tbench_srv packed into the initramfs with dbench's loadfile; the loopback
    traffic they make is the guest's (netdev reads the guest's /proc/net/dev)."""
    proc = perfline(
        tmp_path / "db", "run", "tbench", "-p", "clients=2", "-p", "duration=3", "--repeat", "1", "--warmup", "0",
        "--target", "qemu", "--kernel", "debian-6.1", "--vm-cpus", "2", "--accel", "tcg", "--monitor", "netdev",
        "--monitor", "schedstat", "--json",
    )
    [run] = json.loads(proc.stdout)
    assert run["status"] == "completed", run["error"]
    summary = run["summary"]
    throughput = summary["tbench.throughput"]["mean"]
    assert throughput > 0
    # tbench's MB are 2^20 bytes, counted one way; the loopback carries each byte out and in.
    # The monitor's rate is over the whole repetition, client start included, which on a
    # loaded host takes a good part of a 3 s run under TCG (0.49x measured at load 5): a
    # fifth of the throughput is still megabytes a second the host's idle loopback never has.
    assert summary["netdev.rx_bytes"]["mean"] > 0.2 * throughput * 2**20
    # Client and server (started by the guest set-up) ran in the task group: TCG makes
    # their loopback traffic CPU-bound, over a CPU's worth on the two vCPUs.
    assert summary["schedstat.task_cpu_pct"]["mean"] > 100, summary["schedstat.task_cpu_pct"]
    assert run["fingerprint"]["target"] == "qemu"


@vm
def test_migration_cost_pairs_up_the_guests_cpus(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    """The probe runs in the guest, so the CPUs paired are the guest's three, not this host's."""
    proc = perfline(
        tmp_path / "db", "run", "migration-cost", "-p", "size=64K", "-p", "repeat=3", "--repeat", "1",
        "--warmup", "0", "--target", "qemu", "--kernel", "debian-6.1", "--vm-cpus", "3", "--accel", "tcg",
        "--no-monitors", "--json",
    )
    [run] = json.loads(proc.stdout)
    assert run["status"] == "completed", run["error"]
    pairs = {m for m in run["summary"] if m.startswith("migration-cost.cpu")}
    assert pairs == {f"migration-cost.cpu{s}-cpu{d}.cost_us" for s in range(3) for d in range(3) if s != d}
    assert run["settings"]["cpus"] == [0, 1, 2] and run["settings"]["cache_size"] == 65536


@pytest.mark.slow
@vm
def test_perf_profile_records_the_guest_kernel_with_its_own_perf(debian_61: kernels.Kernel, tmp_path: Path) -> None:
    """On a Debian root file system the guest has perf: the profile is the guest kernel's
    (pipe reads and context switches of sched-pipe), not QEMU's code on this host."""
    registered(*KERNEL_612, tmp_path)
    db = tmp_path / "db"
    proc = perfline(
        db, "run", "sched-pipe", "-p", "loops=20000", "--repeat", "2", "--warmup", "0", "--target", "qemu",
        "--kernel", "debian-6.12", "--vm-cpus", "2", "--accel", "tcg", "--monitor", "perf-profile", "--json",
    )
    [run] = json.loads(proc.stdout)
    assert run["status"] == "completed", run["error"]
    assert run["summary"]["perf-profile.samples"]["min"] > 100
    store = Store.open(f"sqlite:///{db}")
    profile, chains = store.profile(run["id"]), store.chains(run["id"])
    store.close()
    symbols = {entry.symbol for entry in profile}
    assert any(s.startswith(("pipe_read", "pipe_write", "finish_task_switch", "__schedule")) for s in symbols), symbols
    assert not any("qemu" in entry.dso or entry.dso == "[JIT]" for entry in profile)
    assert any("pipe_read" in chain.frames or "pipe_write" in chain.frames for chain in chains), chains[:5]
