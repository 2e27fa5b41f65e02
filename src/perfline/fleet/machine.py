"""This machine as the fleet sees it: its name, its class and what it is."""

from __future__ import annotations

import platform
import re

from perfline.store.fleet import MachineFacts
from perfline.targets import local


def default_class(cpu_model: str, cpus: int) -> str:
    """Machines whose numbers compare: the same CPU model and count, e.g.
    `intel-xeon-gold-6148-cpu-2-40ghz-x2`."""
    slug = re.sub(r"[^a-z0-9]+", "-", cpu_model.lower().replace("(r)", "").replace("(tm)", "")).strip("-")
    return f"{slug or 'unknown'}-x{cpus}"


def describe(name: str, machine_class: str | None = None) -> MachineFacts:
    fingerprint = local.fingerprint()
    return MachineFacts(
        name=name,
        machine_class=machine_class or default_class(fingerprint.cpu_model, fingerprint.cpu_count),
        cpu_model=fingerprint.cpu_model,
        cpus=fingerprint.cpu_count,
        memory_bytes=fingerprint.memory_bytes,
        kernel=fingerprint.kernel_release or platform.release(),
        hostname=fingerprint.hostname,
        machine_id=fingerprint.machine_id,
    )
