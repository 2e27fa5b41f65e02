"""Tunables: sysctls, sysfs knobs, cpufreq governors and CPU pinning, applied around a
run and restored afterwards, from a journal if perfline crashed."""

from perfline.tunables.apply import (
    TunableError,
    applied,
    check_available,
    knobs,
    parse_cpu_list,
    read_back,
    read_value,
    restore_leftovers,
)
from perfline.tunables.journal import Journal, state_dir

__all__ = [
    "Journal",
    "TunableError",
    "applied",
    "check_available",
    "knobs",
    "parse_cpu_list",
    "read_back",
    "read_value",
    "restore_leftovers",
    "state_dir",
]
