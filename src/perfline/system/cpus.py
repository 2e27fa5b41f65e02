"""CPU lists in the kernel's cpulist form (`0-2,5`), as /sys and job files write them."""

from __future__ import annotations

# What kernels before 6.x print for an empty mask in some files (nohz_full of a kernel
# built with NO_HZ_FULL and booted without it: Debian 12's 6.1), found by a health job there.
EMPTY_MASK = "(null)"


def parse_cpu_list(text: str) -> set[int]:
    cpus: set[int] = set()
    if text.strip() == EMPTY_MASK:
        return cpus
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def format_cpu_list(cpus: set[int]) -> str:
    """{0, 1, 2, 5} → `0-2,5`, the kernel's cpulist form."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
