"""A KVM that failed on this host boot is not tried again until the host reboots.

Where /dev/kvm opens but cannot run a guest (a nested VM without the features it
needs), `accel auto` would try KVM on every run: QEMU aborts or hangs, and each run
pays for it (up to qemu.KVM_BOOT_TIMEOUT_S) before falling back to TCG. Whether KVM
works does not change while the host runs, so the failure is kept with the host's boot
id: a reboot, perhaps with another kernel or KVM module options, tries KVM again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from perfline.system.files import write_durably
from perfline.system.journal import state_dir
from perfline.targets import local

FILE_NAME = "kvm-failed.json"


@dataclass(frozen=True)
class KvmMemo:
    path: Path
    boot_id: str

    @classmethod
    def for_this_boot(cls) -> KvmMemo:
        return cls(state_dir() / FILE_NAME, local.boot_id())

    def failure(self) -> str | None:
        """Why KVM failed earlier on this host boot, or None if it has not."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None  # none yet, or a file of no use: KVM is simply tried
        if not isinstance(data, dict) or data.get("boot_id") != self.boot_id:
            return None
        return (f"{data.get('reason', 'unknown')} (on an earlier boot of a guest since this host booted; "
                f"KVM is tried again after a reboot, or sooner once {self.path} is deleted)")

    def remember(self, reason: str) -> None:
        write_durably(self.path, json.dumps({"boot_id": self.boot_id, "reason": reason}) + "\n")
