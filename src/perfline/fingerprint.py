"""The fingerprint of a system under test: what must match for two results to be comparable."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Fingerprint:
    hostname: str
    machine_id: str
    boot_id: str
    arch: str
    kernel_release: str
    kernel_version: str
    cmdline: str
    cpu_model: str
    cpu_count: int
    memory_bytes: int
    # Per-policy cpufreq governors; empty where the kernel exposes no cpufreq (many VMs).
    governors: dict[str, str]
    loadavg: tuple[float, float, float]
    # Sysctls and sysfs knobs known to move benchmark results (autogroup, THP, clocksource...).
    sysctls: dict[str, str]
    sysfs: dict[str, str]
    target: str = "local"
    config_source: str | None = None
    # Kept out of the JSON form: the store keeps each distinct config once, by hash.
    kernel_config: str | None = field(default=None, repr=False, compare=False)

    @property
    def config_hash(self) -> str | None:
        if self.kernel_config is None:
            return None
        return hashlib.sha256(self.kernel_config.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["kernel_config"]
        data["config_hash"] = self.config_hash
        data["loadavg"] = list(self.loadavg)
        return data
