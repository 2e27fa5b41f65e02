"""Tunables: sysctls, sysfs knobs, cpufreq governors and CPU pinning, applied around a
run and restored afterwards, from the journal (`system.journal`) if perfline crashed."""

from perfline.tunables.apply import (
    TunableError,
    applied,
    check_available,
    knobs,
    parse_cpu_list,
    read_back,
)

__all__ = [
    "TunableError",
    "applied",
    "check_available",
    "knobs",
    "parse_cpu_list",
    "read_back",
]
