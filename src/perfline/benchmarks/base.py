"""What every benchmark module provides: parameters, metrics, and a set-up/run/tear-down cycle."""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self

from perfline.records.job import ParamValue
from perfline.records.metric import Measurement, Metric
from perfline.system.journal import own_journal
from perfline.system.kernel_state import KernelState
from perfline.system.process import CommandFailed, run

if TYPE_CHECKING:
    from perfline.records.fingerprint import Fingerprint


# Names the built tree of the commit under test in a benchmark command's environment.
TREE_ENV = "PERFLINE_TREE"


class BenchmarkUnavailable(RuntimeError):
    """The benchmark cannot run on this system (missing tool, kernel refusal); says why."""


class BenchmarkFailed(RuntimeError):
    """One repetition failed; `output_tail` is stored with the run."""

    def __init__(self, message: str, output_tail: str = "") -> None:
        super().__init__(message)
        self.output_tail = output_tail


@dataclass(frozen=True)
class Param:
    """A benchmark parameter as a job file may set it."""

    name: str
    type: type[ParamValue]
    default: ParamValue | None
    help: str
    minimum: float | None = None
    choices: tuple[ParamValue, ...] | None = None

    def check(self, value: Any) -> str | None:
        """None when `value` is acceptable, else a message saying what is expected."""
        expected = self.type
        ok = isinstance(value, expected) and not (expected is not bool and isinstance(value, bool))
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            return f"{self.name} must be {_type_word(expected)}, got {value!r}"
        if self.minimum is not None and value < self.minimum:
            return f"{self.name} must be at least {self.minimum:g}, got {value!r}"
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(map(str, self.choices))
            return f"{self.name} must be one of {allowed}, got {value!r}"
        return None


def _type_word(kind: type) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}[kind]


class Benchmark(ABC):
    """One benchmark. Used as a context manager: set up once, `run_once` per repetition.

    Subclasses declare their parameters and metrics as class attributes so that
    `perfline list` and job validation need no instance.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    params: ClassVar[tuple[Param, ...]] = ()
    metrics: ClassVar[tuple[Metric, ...]]
    # The metrics a comparison tests at alpha each: what the benchmark is run for. None:
    # every declared metric. Other metrics it reports (per CPU, per thread, per pair of
    # CPUs, made as they are measured) are judged as one family with the monitors'
    # (analysis.comparison, docs/statistics.md "Many metrics").
    headline: ClassVar[tuple[Metric, ...] | None] = None
    # Debian packages whose tools the benchmark runs; `make install-deps` installs them.
    packages: ClassVar[tuple[str, ...]] = ()
    # True when two instances cannot be set up at once (e.g. a server on a fixed port);
    # interleaved A/B then sets it up around every repetition instead.
    exclusive: ClassVar[bool] = False
    # True when a VM guest needs a Debian root file system with `packages` installed (a
    # server, a tool with data files) rather than an initramfs holding its executables.
    needs_rootfs: ClassVar[bool] = False

    def __init__(self, params: Mapping[str, ParamValue], workdir: Path) -> None:
        self.values: dict[str, ParamValue] = self.resolve_params(params)
        self.workdir = workdir
        # The built tree of the commit under test (bisection, tracking), set by the
        # runner: a command runs there, with $PERFLINE_TREE naming it, so `./bench`
        # finds the program just built.
        self.tree: Path | None = None
        # The only way a benchmark changes kernel state (tracefs files, mounts): the old
        # value is journaled first, so a killed perfline's changes are put back. The
        # runner gives every benchmark of a process the same one.
        self.kernel = KernelState(own_journal())
        # The cgroup v2 directory every process the benchmark starts for itself joins at
        # spawn, when a monitor measures its tasks: on this host set by the runner
        # (`system.cgroup`); a VM's guest's, made there by `targets.guest`.
        self.cgroup: Path | None = None

    @classmethod
    def resolve_params(cls, given: Mapping[str, ParamValue]) -> dict[str, ParamValue]:
        """Defaults overlaid with `given`; names and types are validated by the job parser."""
        resolved: dict[str, ParamValue] = {
            p.name: p.default for p in cls.params if p.default is not None
        }
        resolved.update(given)
        return resolved

    @classmethod
    def headline_names(cls) -> frozenset[str]:
        return frozenset(m.name for m in (cls.metrics if cls.headline is None else cls.headline))

    @classmethod
    def param(cls, name: str) -> Param | None:
        return next((p for p in cls.params if p.name == name), None)

    def setup(self) -> None:
        """Check tools and kernel support, start servers. Raise BenchmarkUnavailable."""

    @abstractmethod
    def run_once(self) -> list[Measurement]:
        """Measure one repetition. Raise BenchmarkFailed on failure."""

    def teardown(self) -> None:
        """Stop what setup started and restore what it changed. Must not raise."""

    def settings(self) -> dict[str, Any]:
        """Facts about how the benchmark ran (e.g. CPU pinning), stored with the run."""
        return {}

    def fingerprint(self) -> Fingerprint | None:
        """After setup: the system under test when it is not this host (a VM guest)."""
        return None

    def __enter__(self) -> Self:
        try:
            self.setup()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.teardown()


@dataclass(frozen=True)
class CommandOutput:
    stdout: str
    stderr: str
    elapsed_s: float


@dataclass(frozen=True)
class GuestSetup:
    """A command a VM guest runs once after boot, before the repetitions."""

    argv: list[str]
    timeout_s: float


class CommandBenchmark(Benchmark):
    """A benchmark whose repetition is one command, then the parsing of its output.

    The split is what lets a target run the command elsewhere (in a VM guest) and
    parse its output here with the same code as a local run. In a guest, `setup` and
    `teardown` do not run on this host: `guest_setup` is run in the guest instead and
    its output handed to `guest_ready`, then each repetition runs `guest_argv`.
    """

    # True when the command changes kernel state this process journaled: a SIGKILLed
    # perfline takes the command along, so the next command's restore is not undone.
    tied: ClassVar[bool] = False

    @abstractmethod
    def argv(self) -> list[str]:
        """The command of one repetition on this host. Unless the benchmark needs a
        root file system, it must not depend on `setup` having run: `executables`
        packs its programs into an initramfs before anything is set up."""

    @abstractmethod
    def parse(self, output: CommandOutput) -> list[Measurement]:
        """Measurements from a successful run's output. Raise BenchmarkFailed."""

    def timeout(self) -> float | None:
        """Seconds before a repetition counts as hung."""
        return None

    def executables(self) -> list[Path]:
        """Host files `argv` executes, which an initramfs guest needs at the same paths."""
        return [Path(self.argv()[0])]

    def guest_setup(self) -> GuestSetup | None:
        """What a guest runs before the repetitions (start a server, find a tool)."""
        return None

    def guest_ready(self, output: CommandOutput) -> None:
        """Take in what `guest_setup` printed (the guest's paths and versions)."""

    def guest_argv(self) -> list[str]:
        """The command of one repetition in a guest, after `guest_ready`."""
        return self.argv()

    def guest_settings(self) -> dict[str, Any]:
        """`settings` of a run in a guest; {} where `settings` would describe this host."""
        return {}

    def failure(self, message: str, output_tail: str) -> BenchmarkFailed:
        """The error for a command that failed (non-zero status, timeout)."""
        return BenchmarkFailed(message, output_tail)

    def run_once(self) -> list[Measurement]:
        return self.parse(self.run_here(self.argv(), self.timeout()))

    def run_here(self, argv: list[str], timeout: float | None) -> CommandOutput:
        """Run a command of this benchmark on this host, in its work directory."""
        started = time.perf_counter()
        env = None if self.tree is None else {**os.environ, TREE_ENV: str(self.tree)}
        try:
            proc = run(argv, timeout=timeout, cwd=self.tree or self.workdir, env=env, tied=self.tied,
                       cgroup=self.cgroup)
        except CommandFailed as exc:
            raise self.failure(str(exc), exc.output_tail) from exc
        return CommandOutput(proc.stdout, proc.stderr, time.perf_counter() - started)
