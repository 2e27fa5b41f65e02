"""The answer of an `ab` over kexec boots (runner.kexec_series): each side's runs, one
a block, compared with each block's run a unit, so that the variation between boots of
the same kernel is measured, not assumed; blocks measured so far give the answer so far."""

from __future__ import annotations

from dataclasses import replace

from perfline.analysis.comparison import CaseComparison, Side, compare_sides
from perfline.records.job import case_from_json
from perfline.store import Store
from perfline.store.kexec_boots import KexecSeries

# The states of a block's boot whose runs count: measured, and back on the default kernel.
COUNTED = ("measured", "returned")


def sides(store: Store, series: KexecSeries) -> list[Side]:
    """A and B: each side's runs, one a block, over the blocks measured so far."""
    boots = [boot for boot in store.series_boots(series.id) if boot.state in COUNTED and boot.series_step is not None]
    named = []
    for side in ("A", "B"):
        mine = [boot for boot in boots if series.steps[boot.series_step or 0]["side"] == side]
        runs = [store.get_run(run_id) for boot in mine for run_id in boot.run_ids]
        kernel = case_from_json(_case(series, side)).boot_kernel
        named.append(Side(f"{side} ({kernel}, {len(mine)} boot{'s' if len(mine) != 1 else ''})", runs))
    return named


def comparison(store: Store, series: KexecSeries) -> CaseComparison | None:
    """The ab's answer from the blocks measured so far; None until each side has a run."""
    named = sides(store, series)
    if any(not side.runs for side in named):
        return None
    settings = series.settings
    floors = settings.get("metric_floors") or {}
    assert isinstance(floors, dict)
    compared = compare_sides(named, store, alpha=float(settings["alpha"]), floor_pct=float(settings["floor"]),
                             metric_floors={str(k): float(v) for k, v in floors.items()})
    done = sum(len(side.runs) for side in named)
    note = (f"ab over kexec boots (series {series.id}): {done} of {len(series.steps)} blocks measured, one boot "
            "each, interleaved")
    if all(len(side.runs) > 1 for side in named):
        note += "; each block's run is a unit, so the variation between boots is measured"
    return replace(compared, notes=[*compared.notes, note])


def _case(series: KexecSeries, side: str) -> dict[str, object]:
    return next(step["case"] for step in series.steps if step["side"] == side)
