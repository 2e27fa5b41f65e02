"""A one-command benchmark run inside a VM that boots the case's kernel.

GuestBenchmark wraps the real benchmark: set-up boots the VM (with a Debian root
file system when the benchmark needs one) and runs the benchmark's guest set-up
there, each repetition sends the benchmark's argv to the guest agent and parses the
reply with the benchmark's own `parse`, tear-down powers the VM off. The run's
fingerprint is the guest's: its kernel release, version, command line, config and
sysctls, with this host's identity and CPU model, and the accelerator that ran it.

When a monitor measures the benchmark's own tasks, set-up also makes them a cgroup in
the guest (GUEST_TASK_GROUP) which the guest set-up's and every repetition's command
join at spawn, as the host's do (`system.cgroup`).
"""

from __future__ import annotations

import base64
import fnmatch
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfline.benchmarks import rootfs_packages
from perfline.benchmarks.base import (
    Benchmark,
    BenchmarkFailed,
    BenchmarkUnavailable,
    CommandBenchmark,
    CommandOutput,
)
from perfline.monitors.files import SystemFiles
from perfline.records.fingerprint import Fingerprint
from perfline.records.job import Case
from perfline.records.metric import Measurement
from perfline.system.cgroup import PSI_MISSING
from perfline.system.process import ToolMissing, tail
from perfline.targets import initramfs, local, rootfs
from perfline.targets.kernels import Kernel, KernelError, get_kernel
from perfline.targets.qemu import GuestFailed, GuestResult, Vm, VmConfig, qemu_version

# What the local fingerprint reads. One `grep -H` prints them all as `path:line`: a
# process per file costs ~10 ms under TCG, and /proc files cannot be archived as they
# report size 0. The binary /proc/config.gz goes as base64 under a `.base64` name.
GUEST_FACTS = (
    "/proc/sys/kernel/osrelease",
    "/proc/sys/kernel/version",
    "/proc/cmdline",
    "/proc/cpuinfo",
    "/proc/meminfo",
    *(f"/proc/sys/{name.replace('.', '/')}" for name in local.RELEVANT_SYSCTLS),
    *local.RELEVANT_SYSFS,
)
PACKED_CONFIG = "/proc/config.gz"
FACTS_SCRIPT = (
    f"grep -sH '' {' '.join(GUEST_FACTS)}; "
    f"[ -r {PACKED_CONFIG} ] && base64 {PACKED_CONFIG} | sed 's|^|{PACKED_CONFIG}.base64:|'; true"
)
FACTS_TIMEOUT_S = 60.0
# The cgroup of the benchmark's tasks in the guest: prints its path, or why there is none
# and exits 1. The agent is the guest's init and mounts no cgroup2 itself (an initramfs
# has only what it mounts, and a root disk's own init never runs), so this does. The
# group is a child of the root with no controllers enabled, so it changes no CPU weight
# or placement. Nothing of it is journaled or removed: the guest is thrown away with
# the VM, whatever happens to the run.
GUEST_TASK_GROUP = """
root=/sys/fs/cgroup
if [ ! -d $root ]; then
    echo "the guest kernel has no cgroups (no $root: CONFIG_CGROUPS off)"; exit 1
fi
if [ ! -e $root/cgroup.procs ] && ! said=$(mount -t cgroup2 cgroup2 $root 2>&1); then
    echo "mounting cgroup2 on $root in the guest failed: $said"; exit 1
fi
said=$(mkdir $root/perfline-tasks 2>&1) || { echo "$said"; exit 1; }
cat $root/perfline-tasks/cpu.pressure > /dev/null 2>&1 || { echo "the guest's $1"; exit 1; }
echo $root/perfline-tasks
"""


class GuestBenchmark(Benchmark):
    name = "guest"
    summary = "a one-command benchmark run in a VM"

    def __init__(
        self, inner: CommandBenchmark, case: Case, warn: Callable[[str], None], group_tasks: bool = False
    ) -> None:
        super().__init__(inner.values, inner.workdir)
        self.tree = inner.tree
        if case.vm is None:
            raise ValueError(f"case {case.key} has no VM settings")
        self.inner = inner
        self.spec = case.vm
        self.cmdline = case.cmdline
        self.warn = warn
        # `group_tasks`: a monitor measures the benchmark's own tasks. After set-up their
        # cgroup in the guest is `cgroup`, or None and `cgroup_missing` says why.
        self.group_tasks = group_tasks
        self.cgroup_missing = ""
        self._vm: Vm | None = None
        self._kernel: Kernel | None = None
        self._disk: Path | None = None
        self._fingerprint: Fingerprint | None = None
        self._qemu = ""

    def setup(self) -> None:
        try:
            self._kernel = get_kernel(self.spec.kernel)
            self._qemu = qemu_version()
            image, self._disk = self._boot_images(self._kernel)
        except (KernelError, initramfs.InitramfsError, rootfs.RootfsError, ToolMissing) as exc:
            raise BenchmarkUnavailable(str(exc)) from exc
        directory = self.workdir / "vm"
        directory.mkdir(exist_ok=True)
        config = VmConfig(
            self._kernel,
            image,
            self.cmdline,
            self.spec.cpus,
            self.spec.memory_mb,
            self.spec.accel,
            disk=self._disk,
        )
        self._vm = Vm(config, directory)
        try:
            self._vm.boot()
        except GuestFailed as exc:
            raise BenchmarkFailed(f"VM with kernel {self.spec.kernel}: {exc}", exc.console_tail) from exc
        for warning in self._vm.warnings:
            self.warn(warning)
        self._fingerprint = self._guest_fingerprint()
        if self.group_tasks:
            # Before the guest set-up: a server it starts (tbench_srv) joins too.
            self._make_task_group()
        step = self.inner.guest_setup()
        if step is not None:
            output, status = self._run(step.argv, step.timeout_s)
            if status != 0:
                raise self.inner.failure(
                    f"{self.inner.name} set-up in the VM exited with status {status}",
                    tail(output.stderr or output.stdout),
                )
            self.inner.guest_ready(output)

    def _boot_images(self, kernel: Kernel) -> tuple[Path, Path | None]:
        """The initramfs and, when the benchmark needs one, the root disk (built if new)."""
        if not self.inner.needs_rootfs:
            return initramfs.build(self.inner.executables()), None
        # Before the build, which takes minutes: a kernel that cannot mount it fails now.
        boot_files = rootfs.initramfs_files(kernel)
        disk = rootfs.build(rootfs.RootfsSpec(rootfs_packages()), progress=self.warn)
        return initramfs.build([], extra=boot_files), disk

    def run_once(self) -> list[Measurement]:
        argv = self.inner.guest_argv()
        output, status = self._run(argv, self.inner.timeout())
        if status != 0:
            raise self.inner.failure(
                f"{Path(argv[0]).name}: exited with status {status} in the VM",
                tail(output.stderr or output.stdout),
            )
        return self.inner.parse(output)

    def teardown(self) -> None:
        if self._vm is not None:
            self._vm.close()

    def settings(self) -> dict[str, Any]:
        assert self._vm is not None and self._kernel is not None
        return {
            **self.inner.guest_settings(),
            **({"vm_rootfs": self._disk.stem} if self._disk is not None else {}),
            "vm_accel": self._vm.accel,
            "vm_kernel": self._kernel.name,
            "vm_kernel_release": self._kernel.release,
            "vm_cmdline": self._vm.config.full_cmdline,
            "vm_cpus": self.spec.cpus,
            "vm_memory_mb": self.spec.memory_mb,
            "qemu_version": self._qemu,
            "vm_boot_s": round(self._vm.boot_s, 3),
            **({"vm_warnings": self._vm.warnings} if self._vm.warnings else {}),
        }

    def fingerprint(self) -> Fingerprint | None:
        return self._fingerprint

    def files(self, patterns: Iterable[str]) -> GuestFiles:
        """The guest's files for monitors that read these (shell patterns)."""
        assert self._vm is not None, "the VM boots in setup"
        return GuestFiles(self._vm, patterns)

    def _make_task_group(self) -> None:
        assert self._vm is not None
        result = run_in_guest(self._vm, ["/bin/sh", "-c", GUEST_TASK_GROUP, "task-group", PSI_MISSING],
                              FACTS_TIMEOUT_S, "making the cgroup of the benchmark's tasks in the guest")
        said = result.stdout.decode(errors="replace").strip()
        if result.status == 0:
            self.cgroup = Path(said)
        else:
            self.cgroup_missing = f"not measured: {said or tail(result.stderr.decode(errors='replace'))}"

    def _run(self, argv: list[str], timeout: float | None) -> tuple[CommandOutput, int]:
        """The benchmark's own command (its set-up's, a repetition's), in its task group."""
        assert self._vm is not None
        result = run_in_guest(self._vm, argv, timeout, "in the VM",
                              None if self.cgroup is None else str(self.cgroup))
        output = CommandOutput(
            result.stdout.decode(errors="replace"),
            result.stderr.decode(errors="replace"),
            result.elapsed_s,
        )
        return output, result.status

    def _guest_fingerprint(self) -> Fingerprint:
        """The local fingerprint read from the guest's files, with this host's identity."""
        assert self._vm is not None and self._kernel is not None
        result = run_in_guest(self._vm, ["/bin/sh", "-c", FACTS_SCRIPT], FACTS_TIMEOUT_S,
                              "reading the guest's fingerprint")
        host = local.fingerprint()
        with tempfile.TemporaryDirectory(prefix="perfline-guest-") as scratch:
            root = Path(scratch)
            unpack_facts(result.stdout.decode(errors="replace"), root)
            guest = local.fingerprint(root)
            cpuinfo = (root / "proc/cpuinfo").read_text(errors="replace")
        config, source = guest.kernel_config, guest.config_source
        if config is None and (registered := self._kernel.config()) is not None:
            config, source = registered, f"perfline kernel {self._kernel.name}"
        return replace(
            guest,
            machine_id=host.machine_id,
            boot_id=host.boot_id,
            cpu_model=host.cpu_model,
            cpu_count=sum(line.startswith("processor") for line in cpuinfo.splitlines()),
            # What the VM was given; what a kernel keeps for itself is in `vm`.
            memory_bytes=self.spec.memory_mb * 2**20,
            # Under emulation the host's load slows the guest; the host's is what matters.
            loadavg=host.loadavg,
            target="qemu",
            kernel_config=config,
            config_source=source,
            vm={
                "accel": self._vm.accel,
                "guest_cpu_model": local.cpu_model(cpuinfo),
                "guest_memtotal_bytes": str(guest.memory_bytes),
            },
        )


def run_in_guest(vm: Vm, argv: list[str], timeout: float | None, what: str,
                 cgroup: str | None = None) -> GuestResult:
    """`vm.run`, a VM that died or hung on the way being the run's failure, said as `what`."""
    try:
        return vm.run(argv, timeout, cgroup)
    except GuestFailed as exc:
        raise BenchmarkFailed(f"{what}: {exc}", exc.console_tail) from exc


def unpack_facts(output: str, root: Path) -> None:
    """Recreate under `root` the files FACTS_SCRIPT printed as `path:line` lines."""
    for path, text in grep_files(output).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if path == f"{PACKED_CONFIG}.base64":
            root.joinpath(PACKED_CONFIG.lstrip("/")).write_bytes(base64.b64decode(text))
        else:
            target.write_text(text)


def grep_files(output: str) -> dict[str, str]:
    """The files `grep -H ''` printed as `path:line` lines, by path (an empty file prints
    nothing, so it is missing here)."""
    contents: dict[str, list[str]] = {}
    for line in output.splitlines():
        path, sep, text = line.partition(":")
        if sep and path.startswith("/"):
            contents.setdefault(path, []).append(text)
    return {path: "\n".join(lines) + "\n" for path, lines in contents.items()}


class GuestFiles(SystemFiles):
    """The guest kernel's files, as the monitors of a case in a VM read them: every file
    they read is fetched in one request at each look (a request costs a round trip to
    the agent, tens of ms under TCG), and timed by the guest's own clock."""

    where = "the guest"

    def __init__(self, vm: Vm, patterns: Iterable[str]) -> None:
        self._vm = vm
        self.shell = self
        # Unquoted: the guest's shell expands the patterns; one that matches nothing stays
        # as written and grep -s and ls pass over it, so the file reads as missing. grep
        # prints nothing of an empty file (/proc/diskstats without disks), so `ls` says
        # which files exist, each on a line marked `=`, which no path begins with.
        files = " ".join(sorted(set(patterns)))
        self._script = f"grep -sH '' {files}; ls -d {files} 2>/dev/null | sed 's/^/=/'; true"
        self._files: dict[str, str] = {}
        self._taken = 0.0

    def refresh(self) -> None:
        result = run_in_guest(self._vm, ["/bin/sh", "-c", self._script], FACTS_TIMEOUT_S,
                              "reading the guest's files for the monitors")
        output = result.stdout.decode(errors="replace")
        texts = grep_files(output)
        present = (line[1:] for line in output.splitlines() if line.startswith("="))
        self._files = {path: texts.get(path, "") for path in present}
        # The files were read between the two stamps; the middle is off by at most half
        # of a read that takes milliseconds, against repetitions of seconds.
        self._taken = (result.started_at + result.ended_at) / 2

    def read_text(self, path: str) -> str:
        try:
            return self._files[path]
        except KeyError:
            raise FileNotFoundError(path) from None

    def glob(self, pattern: str) -> list[str]:
        return sorted(path for path in self._files if fnmatch.fnmatchcase(path, pattern))

    def now(self) -> float:
        return self._taken

    def sh(self, script: str, timeout: float) -> tuple[int, str, str]:
        result = run_in_guest(self._vm, ["/bin/sh", "-c", script], timeout, "a monitor's command in the guest")
        return result.status, result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")
