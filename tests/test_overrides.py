"""The sides of `perfline ab`: `KIND:KEY=VALUE` overrides, parsed and checked as a job
file would be, including `kernel:` and `cmdline:` for the qemu target (no VM booted)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfline.jobs import JobError, expand, job_from_benchmark, load_job
from perfline.jobs.overrides import apply_overrides, parse_override
from perfline.records.job import JobSpec
from perfline.targets import kernels


def fake_bzimage(path: Path, release: str) -> Path:
    """Enough of an x86 bzImage for the registry: the setup header and its version."""
    image = bytearray(0x1000)
    image[0x202:0x206] = b"HdrS"
    image[0x20E:0x210] = (0x600).to_bytes(2, "little")
    image[0x800:0x840] = f"{release} (me@host) #1 SMP\0".encode().ljust(0x40, b"\0")
    path.write_bytes(bytes(image))
    return path


@pytest.fixture(autouse=True)
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two registered kernels, old and new, in a private cache."""
    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "cache"))
    for name in ("old", "new"):
        kernels.add_image(fake_bzimage(tmp_path / f"bzImage-{name}", f"6.9.0-{name}"), name)


def rcu_gp() -> JobSpec:
    return job_from_benchmark("rcu-gp", {"iterations": "2"}, monitors=())


def job_file(tmp_path: Path, text: str) -> JobSpec:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return load_job(path)


def error_of(job: JobSpec, overrides: list[str], **target: object) -> str:
    with pytest.raises(JobError) as info:
        apply_overrides(job, overrides, **target)
    assert "\n" not in str(info.value)  # one line
    return info.value.message


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("kernel:debian-6.12", ("kernel", "kernel", "debian-6.12")),
        ("kernel: new ", ("kernel", "kernel", "new")),
        ("cmdline:rcutree.jiffies_till_first_fqs=0 nokaslr",
         ("cmdline", "cmdline", "rcutree.jiffies_till_first_fqs=0 nokaslr")),
        ("sysctl:vm.swappiness=10", ("sysctl", "vm.swappiness", "10")),
        ("pin:0-1", ("pin", "pin", "0-1")),
    ],
)
def test_parse_override(text: str, parsed: tuple[str, str, str]) -> None:
    assert parse_override(text) == parsed


def test_parse_override_errors() -> None:
    with pytest.raises(JobError, match="needs a registered kernel's name"):
        parse_override("kernel:")
    with pytest.raises(JobError, match=r"use one of param, .*kernel, cmdline"):
        parse_override("kernal:new")


def test_each_side_boots_its_kernel_and_the_rest_is_shared() -> None:
    target = {"target": "qemu", "cpus": 1, "accel": "tcg"}
    a, b = (apply_overrides(rcu_gp(), [f"kernel:{name}"], **target) for name in ("old", "new"))
    assert a.vm is not None and b.vm is not None
    assert (a.vm.kernel, b.vm.kernel) == ("old", "new")
    assert (b.vm.cpus, b.vm.accel, b.vm.memory_mb) == (1, "tcg", 1024)
    [case_a], [case_b] = expand(a), expand(b)
    # The kernel is not part of the case: the two sides are one case on two kernels.
    assert case_a.key == case_b.key == "iterations=2"
    assert (case_a.vm, case_b.vm) == (a.vm, b.vm)


def test_side_overrides_win_over_both_sides_options() -> None:
    target = {"target": "qemu", "kernel": "old", "cmdline": "quiet"}
    plain = apply_overrides(rcu_gp(), ["param:iterations=3"], **target)
    assert plain.vm is not None and plain.vm.kernel == "old"
    [case] = expand(plain)
    assert case.cmdline == "quiet" and case.params["iterations"] == 3
    own = apply_overrides(rcu_gp(), ["kernel:new", "cmdline:rcutree.jiffies_till_first_fqs=0"], **target)
    assert own.vm is not None and own.vm.kernel == "new"
    [case] = expand(own)
    assert case.cmdline == "rcutree.jiffies_till_first_fqs=0"
    assert 'cmdline:"rcutree.jiffies_till_first_fqs=0"' in case.key  # unlike the kernel


def test_job_file_with_target_qemu_takes_the_side_kernel(tmp_path: Path) -> None:
    job = job_file(tmp_path, "benchmark: rcu-gp\ntarget: qemu\nkernel: old\nvm_memory: 512\n")
    side = apply_overrides(job, ["kernel:new"])
    assert side.vm is not None and (side.vm.kernel, side.vm.memory_mb) == ("new", 512)
    assert apply_overrides(job, []).vm == job.vm


@pytest.mark.parametrize("override", ["kernel:new", "cmdline:nokaslr"])
def test_vm_overrides_need_a_qemu_target(tmp_path: Path, override: str) -> None:
    expected = (
        f"{override!r}: applies to a VM: use a qemu target (--target qemu, or `target: qemu` in the job file)"
    )
    assert error_of(rcu_gp(), ["param:iterations=3", override]) == expected
    local = job_file(tmp_path, "benchmark: rcu-gp\ntarget: local\n")
    assert error_of(local, [override]) == expected
    assert error_of(rcu_gp(), [override], target="local") == expected


def test_unknown_side_kernel_is_named() -> None:
    message = error_of(rcu_gp(), ["kernel:newer"], target="qemu")
    assert message.startswith("'kernel:newer': unknown kernel 'newer'") and "new" in message


def test_side_without_a_kernel_on_qemu_says_so() -> None:
    assert "target qemu needs a kernel" in error_of(rcu_gp(), ["param:iterations=3"], target="qemu")


@pytest.mark.parametrize(
    ("override", "kind", "yaml"),
    [
        ("sysctl:vm.swappiness=1", "sysctl", "{vm.swappiness: 1}"),
        ("sysfs:/sys/kernel/mm/transparent_hugepage/enabled=never", "sysfs",
         "{/sys/kernel/mm/transparent_hugepage/enabled: never}"),
        ("governor:performance", "governor", "performance"),
        ("pin:0", "pin", "'0'"),
    ],
)
def test_host_tunables_are_refused_with_qemu_as_in_a_job_file(
    tmp_path: Path, override: str, kind: str, yaml: str
) -> None:
    """The bug: these were applied on the host while the benchmark ran in the guest."""
    with pytest.raises(JobError) as info:
        job_file(tmp_path, f"benchmark: rcu-gp\ntarget: qemu\nkernel: old\ntunables:\n  {kind}: {yaml}\n")
    from_job_file = info.value.message
    assert "would be applied on this host" in from_job_file
    qemu_job = job_file(tmp_path, "benchmark: rcu-gp\ntarget: qemu\nkernel: old\n")
    assert error_of(qemu_job, [override]) == f"{override!r}: {from_job_file}"
    assert error_of(rcu_gp(), ["kernel:new", override], target="qemu") == f"{override!r}: {from_job_file}"
    # On this host they are what they always were.
    side = apply_overrides(rcu_gp(), [override])
    assert kind in side.tunables and side.vm is None


def test_benchmark_that_cannot_run_in_a_vm_is_refused() -> None:
    job = job_from_benchmark("cyclictest", {}, monitors=())
    assert "cannot run with target qemu" in error_of(job, ["kernel:new"], target="qemu")


@pytest.mark.parametrize(("text", "message"), [
    ("sysfs:/sys/../etc/passwd=1", "must be a normalized absolute path under /sys/"),
    ("sysfs:/proc/sys/vm/swappiness=10", "write it in a sysctl: override as 'vm.swappiness'"),
])
def test_sysfs_paths_are_checked_as_in_job_files(text: str, message: str) -> None:
    with pytest.raises(JobError, match=re.escape(message)):
        parse_override(text)
