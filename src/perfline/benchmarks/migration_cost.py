"""Cache-hot migration cost between every pair of CPUs, after Ingo Molnar's 2005 patch.

Runs native/migration_cost, whose header explains the method. `format_matrix` prints the
result the way the kernel printed it at boot ("migration cost matrix (...)"), in µs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from statistics import fmean
from typing import Any

from perfline.benchmarks.base import (
    BenchmarkFailed,
    BenchmarkUnavailable,
    CommandBenchmark,
    CommandOutput,
    GuestSetup,
    Param,
    ParamValue,
)
from perfline.records.metric import Direction, Measurement, Metric
from perfline.system.native import native_binary
from perfline.system.process import ToolMissing

# The set-up probe migrates once per pair; a repetition migrates `repeat` times per pair.
# Ten times the probe's pace absorbs a noisy machine without waiting forever on a hung one.
TIMEOUT_FACTOR = 10.0
TIMEOUT_SLACK_S = 30.0
# The probe in a guest: emulated CPUs are slower by tens of times than this host's.
PROBE_IN_GUEST_TIMEOUT_S = 600.0

MAX_COST = Metric(
    "migration-cost.max_cost_us",
    "µs",
    Direction.LOWER,
    "extra time to re-touch a cache-hot working set after a migration, worst CPU pair",
)
MEAN_COST = Metric(
    "migration-cost.mean_cost_us",
    "µs",
    Direction.LOWER,
    "extra time to re-touch a cache-hot working set after a migration, mean over CPU pairs",
)

_SIZE = re.compile(r"(\d+)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def pair_metric(src: int, dst: int) -> Metric:
    """The per-pair counterpart of MAX_COST; created as pairs are measured."""
    return Metric(
        f"migration-cost.cpu{src}-cpu{dst}.cost_us",
        MAX_COST.unit,
        MAX_COST.direction,
        f"extra time to re-touch a cache-hot working set after migrating from CPU {src} "
        f"to CPU {dst}",
    )


def parse_size(text: str) -> int | None:
    """Bytes from `262144`, `256K` or `32MiB`; None for `auto` (the last-level cache's)."""
    if text.strip().lower() == "auto":
        return None
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"size {text!r}: expected auto or bytes such as 262144, 256K, 32M")
    return int(match[1]) * _SIZE_UNITS[match[2].lower()]


@dataclass(frozen=True)
class PairCost:
    """One ordered CPU pair, in ns: `median/min/mad` of the first touch after migrating,
    `hot_*` of the next one on the same CPU, `cost` of their difference."""

    src: int
    dst: int
    repeat: int
    hot_median_ns: int
    hot_min_ns: int
    median_ns: int
    min_ns: int
    mad_ns: int
    cost_ns: int
    cost_mad_ns: int

    @property
    def cost_us(self) -> float:
        return self.cost_ns / 1000


@dataclass(frozen=True)
class MigrationResult:
    cache_size: int
    cache_level: int | None  # None: the size was given, not read from sysfs
    line_size: int
    cpu_mhz: float | None  # None: /proc/cpuinfo has no "cpu MHz" (arm64, some VMs)
    pairs: tuple[PairCost, ...]

    @property
    def cpus(self) -> list[int]:
        return sorted({p.src for p in self.pairs})

    def cross_cpu(self) -> list[PairCost]:
        """The pairs that really migrate; the diagonal only shows the noise floor."""
        return [p for p in self.pairs if p.src != p.dst]


def parse_output(text: str) -> MigrationResult:
    """The header and `src=N dst=N ...` lines of migration_cost, every ordered pair once."""
    lines = text.splitlines()
    if not lines:
        raise ValueError("migration_cost printed nothing")
    header = _fields(lines[0])
    pairs = []
    for line in lines[1:]:
        values = _fields(line)
        try:
            pairs.append(PairCost(**{f.name: int(values[f.name]) for f in fields(PairCost)}))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"unexpected migration_cost line {line!r}") from exc
    try:
        result = MigrationResult(
            cache_size=int(header["cache_size"]),
            cache_level=int(header["cache_level"]) if "cache_level" in header else None,
            line_size=int(header["line_size"]),
            cpu_mhz=float(header["cpu_mhz"]) if "cpu_mhz" in header else None,
            pairs=tuple(pairs),
        )
    except (KeyError, ValueError) as exc:
        raise ValueError(f"unexpected migration_cost header {lines[0]!r}") from exc
    cpus = result.cpus
    if not pairs or sorted((p.src, p.dst) for p in pairs) != [(s, d) for s in cpus for d in cpus]:
        raise ValueError(f"migration_cost did not print every ordered pair of CPUs {cpus}")
    return result


def _fields(line: str) -> dict[str, str]:
    return dict(field.partition("=")[::2] for field in line.split())


def format_matrix(result: MigrationResult) -> str:
    """The seed's boot-time table: one row per source CPU, cells `cost(MAD)` in µs."""
    cpus = result.cpus
    digits = max(2, len(str(cpus[-1])))
    cells = {
        (p.src, p.dst): f"{p.cost_ns / 1000:z.1f}({p.cost_mad_ns / 1000:.1f})"
        for p in result.pairs
    }
    width = max(len(cell) for cell in cells.values())
    mhz = "unknown" if result.cpu_mhz is None else f"{result.cpu_mhz:.0f} MHz"
    rule = "-" * 21
    # Blank where the rows have their "[NN]:" label.
    header = " " * (digits + 3) + "".join(f" {f'[{d:0{digits}d}]':>{width}}" for d in cpus)
    lines = [
        rule,
        f"migration cost matrix (cache_size: {_size_text(result.cache_size)}, cpu: {mhz}):",
        rule,
        header,
    ]
    for src in cpus:
        row = "".join(f" {cells[src, dst]:>{width}}" for dst in cpus)
        lines.append(f"[{src:0{digits}d}]:{row}")
    cross = result.cross_cpu()
    lines += [
        rule,
        (f"cost(MAD) in µs, {result.pairs[0].repeat} migration(s) per pair: first touch after "
        "migrating minus the next one"),
        "the diagonal migrates nowhere: its spread is the noise floor",
    ]
    if cross:
        lines.append(
            f"max {max(p.cost_us for p in cross):.1f} µs, "
            f"mean {fmean(p.cost_us for p in cross):.1f} µs over {len(cross)} CPU pairs"
        )
    lines.append(rule)
    return "\n".join(lines)


def _size_text(size: int) -> str:
    return f"{size // 1024} KB" if size % 1024 == 0 else f"{size} bytes"


class MigrationCost(CommandBenchmark):
    name = "migration-cost"
    summary = (
        "extra time to re-touch a cache-hot working set after migrating to another CPU, "
        "every ordered CPU pair"
    )
    params = (
        Param(
            "size",
            str,
            "auto",
            "working set: bytes, e.g. 262144 or 256K (quote plain numbers in YAML); "
            "auto: the last-level cache",
        ),
        Param(
            "repeat",
            int,
            20,
            "migrations per CPU pair in one repetition; the sample is their median",
            minimum=1,
        ),
        Param("cpus", str, "all", "CPUs to pair up, e.g. 0,2-3; all: every CPU perfline may use"),
    )
    metrics = (MAX_COST, MEAN_COST)

    def __init__(self, params: Mapping[str, ParamValue], workdir: Path) -> None:
        super().__init__(params, workdir)
        self._probe: MigrationResult | None = None
        self._probe_s = 0.0

    def setup(self) -> None:
        # One migration per pair shows a bad CPU list or an unknown cache size before any
        # repetition, and paces the timeout of the real ones. It has no timeout itself:
        # its length grows with CPUs squared times the cache size, which nothing bounds.
        try:
            argv = self._argv(1)
        except (ToolMissing, ValueError) as exc:
            raise BenchmarkUnavailable(str(exc)) from exc
        try:
            output = self.run_here(argv, None)
        except BenchmarkFailed as exc:
            raise BenchmarkUnavailable(f"{exc}\n{exc.output_tail}") from exc
        self.guest_ready(output)

    def guest_setup(self) -> GuestSetup:
        return GuestSetup(self._argv(1), PROBE_IN_GUEST_TIMEOUT_S)

    def guest_ready(self, output: CommandOutput) -> None:
        """Take in the probe (here or in a guest): the CPUs, the cache, its pace."""
        try:
            self._probe = parse_output(output.stdout)
        except ValueError as exc:
            raise BenchmarkUnavailable(f"migration-cost: {exc}\n{output.stdout}") from exc
        self._probe_s = output.elapsed_s
        if not self._probe.cross_cpu():
            raise BenchmarkUnavailable(
                f"migration-cost needs at least two CPUs, got {self._probe.cpus}"
            )

    def argv(self) -> list[str]:
        return self._argv(int(self.values["repeat"]))

    def timeout(self) -> float:
        return TIMEOUT_SLACK_S + TIMEOUT_FACTOR * self._probe_s * int(self.values["repeat"])

    def measure(self) -> MigrationResult:
        """Every ordered pair, `repeat` migrations each; for callers that want the matrix."""
        return self._result(self.run_here(self.argv(), self.timeout()))

    def parse(self, output: CommandOutput) -> list[Measurement]:
        cross = self._result(output).cross_cpu()
        per_pair = [Measurement(pair_metric(p.src, p.dst), p.cost_us) for p in cross]
        costs = [m.value for m in per_pair]
        return [*per_pair, Measurement(MAX_COST, max(costs)), Measurement(MEAN_COST, fmean(costs))]

    def settings(self) -> dict[str, Any]:
        probe = self._probe
        if probe is None:
            return {}
        return {
            "cpus": probe.cpus,
            "cache_size": probe.cache_size,
            "cache_level": probe.cache_level,
            "line_size": probe.line_size,
            "cpu_mhz": probe.cpu_mhz,
            "migrations_per_pair": self.values["repeat"],
        }

    def guest_settings(self) -> dict[str, Any]:
        return self.settings()  # the probe ran in the guest: its CPUs and cache

    def _argv(self, repeat: int) -> list[str]:
        # Not from setup: an initramfs packs argv()[0] before anything is set up.
        argv = [str(native_binary("migration_cost")), f"--repeat={repeat}", f"--cpus={self.values['cpus']}"]
        if (size := parse_size(str(self.values["size"]))) is not None:
            argv.append(f"--size={size}")
        return argv

    def _result(self, output: CommandOutput) -> MigrationResult:
        try:
            return parse_output(output.stdout)
        except ValueError as exc:
            raise BenchmarkFailed(f"migration-cost: {exc}", output.stdout) from exc
