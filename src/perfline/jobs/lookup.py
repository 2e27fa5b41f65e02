"""A benchmark's class by name, with the job parser's kind of error when it is unknown or broken."""

from __future__ import annotations

from collections.abc import Callable

from perfline.benchmarks import BENCHMARKS, Benchmark
from perfline.plugins import BrokenPlugin
from perfline.records.job import JobError


def benchmark_class(name: str, fail: Callable[[str], JobError]) -> type[Benchmark]:
    """The benchmark class for a known name; a module that cannot load is a JobError."""
    if name not in BENCHMARKS:
        raise fail(f"unknown benchmark {name!r}: {BENCHMARKS.suggestion(name)}")
    return _load_benchmark(name, fail)


def _load_benchmark(name: str, fail: Callable[[str], JobError]) -> type[Benchmark]:
    try:
        return BENCHMARKS.get(name)
    except BrokenPlugin as exc:
        raise fail(str(exc)) from exc
    except (ImportError, AttributeError) as exc:
        raise fail(f"benchmark {name!r} cannot be loaded: {exc}") from exc
