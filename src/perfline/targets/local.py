"""The local target: benchmarks run on this host; its fingerprint is read from /proc and /sys."""

from __future__ import annotations

import gzip
import os
import platform
import socket
from pathlib import Path

from perfline.records.fingerprint import Fingerprint
from perfline.system.tracing import read_tracing

# Sysctls known to move scheduler, memory and network benchmarks; missing ones are skipped.
RELEVANT_SYSCTLS = (
    "kernel.sched_autogroup_enabled",
    "kernel.sched_rt_runtime_us",
    "kernel.sched_rt_period_us",
    "kernel.numa_balancing",
    "kernel.timer_migration",
    "kernel.perf_event_paranoid",
    "kernel.randomize_va_space",
    "kernel.nmi_watchdog",
    "vm.swappiness",
    "vm.dirty_ratio",
    "vm.dirty_background_ratio",
    "vm.overcommit_memory",
    "vm.zone_reclaim_mode",
    "net.core.somaxconn",
    "net.ipv4.tcp_congestion_control",
)

RELEVANT_SYSFS = (
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/kernel/mm/transparent_hugepage/defrag",
    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
    "/sys/devices/system/cpu/smt/control",
    "/sys/devices/system/cpu/intel_pstate/no_turbo",
    "/sys/devices/system/cpu/cpufreq/boost",
    "/sys/kernel/security/lockdown",
    "/sys/module/rcutree/parameters/jiffies_till_first_fqs",
    "/sys/module/rcutree/parameters/jiffies_till_next_fqs",
)


def fingerprint(root: Path = Path("/")) -> Fingerprint:
    """Describe this host now. `root` lets tests point at a captured /proc and /sys tree."""
    proc, sys = root / "proc", root / "sys"
    config, config_source = kernel_config(root, platform.release())
    return Fingerprint(
        hostname=hostname(),
        machine_id=machine_id(root),
        boot_id=boot_id(root),
        arch=platform.machine(),
        kernel_release=_read(proc / "sys/kernel/osrelease") or platform.release(),
        kernel_version=_read(proc / "sys/kernel/version") or platform.version(),
        cmdline=_read(proc / "cmdline"),
        cpu_model=cpu_model(_read(proc / "cpuinfo")),
        cpu_count=os.cpu_count() or 1,
        memory_bytes=memory_bytes(_read(proc / "meminfo")),
        governors=governors(sys / "devices/system/cpu/cpufreq"),
        loadavg=loadavg(_read(proc / "loadavg")),
        sysctls={
            name: value
            for name in RELEVANT_SYSCTLS
            if (value := _read(proc / "sys" / name.replace(".", "/")))
        },
        sysfs={path: value for path in RELEVANT_SYSFS if (value := _read(root / path[1:]))},
        target="local",
        tracing=read_tracing().flat(),
        config_source=config_source,
        kernel_config=config,
    )


def kernel_config(root: Path, release: str) -> tuple[str | None, str | None]:
    """The running kernel's config and where it came from; (None, None) if not exposed."""
    packed = root / "proc/config.gz"
    try:
        return gzip.decompress(packed.read_bytes()).decode(), "/proc/config.gz"
    except OSError:
        pass
    boot = root / "boot" / f"config-{release}"
    text = _read(boot, strip=False)
    return (text, f"/boot/config-{release}") if text else (None, None)


def cpu_model(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        # x86 says "model name"; arm64 has no model name, only the CPU part numbers.
        if key.strip() in ("model name", "Hardware", "cpu model", "uarch"):
            return value.strip()
    return platform.processor() or "unknown"


def memory_bytes(meminfo: str) -> int:
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def governors(cpufreq: Path) -> dict[str, str]:
    if not cpufreq.is_dir():
        return {}
    return {
        policy.name: governor
        for policy in sorted(cpufreq.glob("policy*"))
        if (governor := _read(policy / "scaling_governor"))
    }


def loadavg(text: str) -> tuple[float, float, float]:
    fields = text.split()
    if len(fields) < 3:
        return (0.0, 0.0, 0.0)
    return (float(fields[0]), float(fields[1]), float(fields[2]))


def machine_id(root: Path = Path("/")) -> str:
    """This machine's id (systemd's, else D-Bus's): what tells one machine's runs from another's."""
    return _read(root / "etc/machine-id") or _read(root / "var/lib/dbus/machine-id")


def hostname() -> str:
    return socket.gethostname()


def boot_id(root: Path = Path("/")) -> str:
    """Changes at every boot: tells a run left `running` by a reboot from a live one."""
    return _read(root / "proc/sys/kernel/random/boot_id")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: Path, strip: bool = True) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    # /proc/cmdline and friends end in newlines; configs keep theirs for a faithful copy.
    return text.replace("\0", " ").strip() if strip else text
