"""`perfline migration-cost`: the seed's migration cost matrix, measured once, not stored."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Annotated

import typer

from perfline.records.job import ParamValue

EXIT_FAILED = 1


def migration_cost(
    cpus: Annotated[
        str, typer.Option(help="CPUs to pair up, e.g. 0,2-3; all: every CPU perfline may use.")
    ] = "all",
    size: Annotated[
        str,
        typer.Option(help="Working set in bytes, e.g. 262144 or 256K; auto: the last-level cache."),
    ] = "auto",
    repeat: Annotated[int, typer.Option(min=1, help="Migrations per CPU pair.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Cache-hot migration cost between every pair of CPUs, as Ingo's 2005 patch printed it.

    Measures once and stores nothing; `perfline run migration-cost` tracks it over time.

    Example: perfline migration-cost --cpus 0-3
    """
    # Not above: the benchmarks' registry is slow to import and only this command needs it.
    from perfline.benchmarks import BenchmarkFailed, BenchmarkUnavailable
    from perfline.benchmarks.migration_cost import MigrationCost, format_matrix

    params: dict[str, ParamValue] = {"cpus": cpus, "size": size, "repeat": repeat}
    try:
        with TemporaryDirectory(prefix="perfline-migration-") as scratch, MigrationCost(params, Path(scratch)) as bench:
            result = bench.measure()
    except BenchmarkUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_FAILED) from None
    except BenchmarkFailed as exc:
        typer.echo(f"error: {exc}\n{exc.output_tail}", err=True)
        raise typer.Exit(EXIT_FAILED) from None
    if as_json:
        print(json.dumps(asdict(result), indent=2))
    else:
        print(format_matrix(result))
