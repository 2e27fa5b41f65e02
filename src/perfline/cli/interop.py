"""`perfline import` and `perfline export`: other tools' results in, perfline's out."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from perfline.cli.common import console, fail, open_store

if TYPE_CHECKING:
    from perfline.interop.otava import OtavaColumns


def import_(
    path: Annotated[Path, typer.Argument(help="A result file, or a directory of them.")],
    fmt: Annotated[str | None, typer.Option("--format", help="gbench, pytest-benchmark, hyperfine, bmf, otava, lkp "
                                                             "or perfline (default: detected).")] = None,
    label: Annotated[str | None, typer.Option(help="Label stored with every imported run.")] = None,
    machine: Annotated[str | None, typer.Option(help="The machine the results came from (default: the file's "
                                                     "host name, else 'imported').")] = None,
    kernel_commit: Annotated[str | None, typer.Option(help="The commit every imported run measured.")] = None,
    commit_from_file: Annotated[bool, typer.Option(help="Take each run's commit from the file where it names one "
                                                        "(asv's commit_hash, Otava's commit column, pytest-benchmark's "
                                                        "commit_info); --kernel-commit overrides it.")] = True,
    direction: Annotated[list[str] | None, typer.Option(
        help="METRIC=higher|lower where the format does not say (repeat it).")] = None,
    metrics: Annotated[str | None, typer.Option(
        "--metrics", metavar="COL,...", help="Otava CSV: these columns are the metrics (default: every column whose "
                                             "values are all numbers).")] = None,
    attributes: Annotated[str | None, typer.Option(
        "--attributes", metavar="COL,...", help="Otava CSV: these columns are attributes, each value its own series "
                                                "(default: every other column but time and commit).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be stored; store nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Import a file imported before once more.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help='Print {"format", "runs", "samples", "skipped"}.')] = False,
) -> None:
    """Import other tools' results: they become runs like measured ones (history, detect,
    compare, track, the dashboard), marked with their source file.

    Example: perfline import results.csv --format otava --label nightly
    """
    from perfline.interop.importing import plan

    directions = {}
    for item in direction or []:
        name, _, value = item.partition("=")
        if value not in ("higher", "lower"):
            raise fail(f"--direction {item}: give METRIC=higher or METRIC=lower")
        directions[name] = value
    found = plan(path, fmt, label=label, machine=machine, commit=kernel_commit,
                 commit_from_file=commit_from_file and kernel_commit is None,
                 directions=directions, columns=_columns(metrics, attributes))
    store = open_store()
    before = sorted({run for digest in found.digests for run in store.imported_from(digest)})
    if before and not force and found.format != "perfline":
        raise fail(f"{path}: imported before (runs {', '.join(map(str, before[:10]))}); --force imports it again")
    ids: list[int] = []
    if not dry_run:
        if found.format == "perfline":
            # One export file at a time: its regressions name its runs by position.
            for export in found.exports:
                added = store.add_imported(export.runs, export.configs)
                store.add_exported_regressions(added, export.regressions)
                ids += added
        else:
            ids = store.add_imported(found.runs)
    if as_json:
        print(json.dumps({"format": found.format, "runs": ids, "samples": found.samples, "skipped": found.skipped,
                          "dry_run": dry_run}))
        return
    what = "would store" if dry_run else "stored"
    console.print(f"{found.format}: {what} {len(found.runs)} run(s), {found.samples} sample(s) from "
                  f"{len(found.files)} file(s); {found.skipped} value(s) skipped (NaN, Infinity, null)"
                  + (f"; runs {ids[0]}-{ids[-1]}" if ids else ""), highlight=False)


def export(
    run_ids: Annotated[list[int] | None, typer.Argument(help="Runs to export (default: every run).")] = None,
    label: Annotated[str | None, typer.Option(help="Only runs with this label.")] = None,
    since: Annotated[str | None, typer.Option(help="Only runs started on or after this date (YYYY-MM-DD).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="perfline (lossless JSON), csv (long form), bmf or otava.")
                   ] = "perfline",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
) -> None:
    """Export runs: perfline's JSON re-imports to the same store; CSV, BMF and Otava for other tools.

    Example: perfline export --label v6.7 --format csv -o v6.7.csv
    """
    from perfline.interop.exporting import FORMATS
    from perfline.interop.exporting import export as render

    if fmt not in FORMATS:
        raise fail(f"--format {fmt}: one of {', '.join(FORMATS)}")
    try:
        start = datetime.fromisoformat(since).replace(tzinfo=UTC) if since else None
    except ValueError:
        raise fail(f"--since {since}: give a date, YYYY-MM-DD") from None
    text = render(open_store(), fmt, run_ids, label, start)
    if output is None:
        print(text, end="")
    else:
        output.write_text(text)
        console.print(f"wrote {output}", highlight=False)


def _columns(metrics: str | None, attributes: str | None) -> OtavaColumns | None:
    if metrics is None and attributes is None:
        return None
    from perfline.interop.otava import OtavaColumns

    def names(option: str, text: str | None) -> tuple[str, ...] | None:
        if text is None:
            return None
        found = tuple(name.strip() for name in text.split(","))
        if not all(found):
            raise fail(f"{option} {text!r}: give column names separated by commas, e.g. {option} throughput,p99")
        return found

    return OtavaColumns(names("--metrics", metrics), names("--attributes", attributes))
