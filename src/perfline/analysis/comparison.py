"""Comparing runs: sides built from stored runs, every metric compared against the
baseline, and the fingerprint differences that a comparison must show beside it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

from perfline.records.fingerprint import (
    MIXED,
    Difference,
    config_differences,
    differences,
    flatten,
)
from perfline.records.metric import Metric
from perfline.records.profile import Chain, Symbol
from perfline.stats.profile_diff import ChainShift, SymbolShift, shares, shifts
from perfline.stats.summary import Summary, summarize

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from perfline.stats.two_sample import Comparison
    from perfline.store import RunDetail, SampleColumns, Store

DEFAULT_ALPHA = 0.01
DEFAULT_FLOOR_PCT = 1.0
DEFAULT_CONFIDENCE = 0.95
# The family of a table (its monitor metrics and the benchmark's metrics that are not
# its headline: per CPU, per thread, per pair) together gets half of alpha: with the
# headline metric at alpha, a table with no change anywhere shows any `*` at most ~1.5%
# of the time (bench/verdict_scenarios.py; each metric at alpha: 24%). A table without
# headline metrics (compare --csv without --primary) keeps the family at half of alpha
# too: compare's per-metric rate on 10 samples a side is ~1.4% at alpha 0.01, and 20
# such columns as a family at alpha showed a `*` in 2.8% of 250 null tables.
FAMILY_ALPHA_SHARE = 0.5


# Settings that describe how a run went, not what it ran under; `disturbances` (the
# start-up check's findings: busy CPUs, load) differ in every run, and what in them
# matters for comparability (tracing) is in the fingerprint.
NOT_COMPARED_SETTINGS = ("interleaved", "ci_halfwidth_pct", "precision_reached", "vm_boot_s", "disturbances",
                         "imported", "summary_only",
                         "order")


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a run, or all runs of one case with one label or kernel."""

    name: str
    runs: list[RunDetail]
    # Every metric's samples over the runs, as the store reads them for many runs
    # (Store.get_runs); None: gathered from the runs' own samples.
    samples: dict[str, SampleColumns] | None = None

    def metrics(self) -> dict[str, tuple[Metric, str]]:
        """Each metric with its source, in the order they first appear."""
        return {name: (column.metric, column.source) for name, column in self._columns.items()}

    def values(self, metric: str) -> NDArray[np.float64] | list[float]:
        column = self._columns.get(metric)
        return [] if column is None else column.values

    def run_labels(self, metric: str) -> NDArray[np.int64] | list[int]:
        """The run of each of `values(metric)`: runs, not repetitions, are the unit."""
        column = self._columns.get(metric)
        return [] if column is None else column.runs

    @cached_property
    def _columns(self) -> dict[str, SampleColumns]:
        if self.samples is not None:
            return self.samples
        from perfline.store import sample_columns  # SQLAlchemy: only when comparing, not at start-up

        rows = [(run.info.id, s.repetition, s.metric.name, s.source, s.value) for run in self.runs for s in run.samples]
        metrics = {s.metric.name: s.metric for run in self.runs for s in run.samples}
        return sample_columns(rows, metrics, [run.info.id for run in self.runs])

    def description(self) -> dict[str, str]:
        """Fingerprint, params, tunables and settings, flattened; facts that differ
        between the side's own runs read `mixed: a | b`."""
        merged: dict[str, set[str]] = defaultdict(set)
        for run in self.runs:
            facts = flatten(run.fingerprint)
            facts.update({f"param {k}": str(v) for k, v in run.params.items()})
            for kind, values in run.tunables.items():
                facts.update({f"tunable {kind}:{k}": str(v) for k, v in values.items()})
            facts.update({f"setting {k}": str(v) for k, v in run.settings.items()
                          if k not in NOT_COMPARED_SETTINGS})
            for key, value in facts.items():
                merged[key].add(value)
        return {k: v.pop() if len(v) == 1 else MIXED + " | ".join(sorted(v))
                for k, v in merged.items()}

    def load(self) -> float:
        loads = [run.fingerprint["loadavg"][0] for run in self.runs]
        return sum(loads) / len(loads)

    def config_hashes(self) -> set[str]:
        return {h for run in self.runs if (h := run.fingerprint.get("config_hash"))}


@dataclass(frozen=True)
class MetricRow:
    metric: Metric
    source: str
    base: Summary
    # One per non-baseline side; None where that side has no samples of the metric.
    others: list[Comparison | None]


@dataclass(frozen=True)
class CaseComparison:
    benchmark: str
    case_key: str
    sides: list[Side]
    rows: list[MetricRow]
    # Per non-baseline side: what differs from the baseline.
    differences: list[list[Difference]] = field(default_factory=list)
    # Per non-baseline side: symbols whose share of CPU time moved most (perf-profile),
    # and the call chains whose share moved most.
    profile_shifts: list[list[SymbolShift]] = field(default_factory=list)
    chain_shifts: list[list[ChainShift]] = field(default_factory=list)
    # What the reader must know to trust the verdicts (one-run sides, the rule for
    # monitor metrics), one sentence each.
    notes: list[str] = field(default_factory=list)
    # The level each benchmark metric was tested at, and its interval's confidence.
    alpha: float = DEFAULT_ALPHA
    confidence: float = DEFAULT_CONFIDENCE

    @property
    def cross_machine(self) -> bool:
        return any(d.kind == "machine" for diffs in self.differences for d in diffs)


def compare_sides(
    sides: list[Side],
    store: Store,
    *,
    alpha: float = DEFAULT_ALPHA,
    floor_pct: float = DEFAULT_FLOOR_PCT,
    metric_floors: Mapping[str, float] | None = None,
    paired: bool = False,
    confidence: float = DEFAULT_CONFIDENCE,
) -> CaseComparison:
    """Every metric of the baseline side against every other side. `paired`: the i-th
    values of the sides were measured back to back (interleaved A/B)."""
    # Imported here: scipy costs a second at start-up and only comparisons need it.
    from perfline.stats.counted import compare_counted, counted_floor
    from perfline.stats.two_sample import compare

    base, others = sides[0], sides[1:]
    # Imported summaries (a mean from another tool's file, no samples) are shown, never
    # compared as if they were a sample of one.
    summaries = {name for side in sides for run in side.runs for name in run.settings.get("summary_only", {})}
    rows = []
    for name, (metric, source) in base.metrics().items():
        base_values = base.values(name)
        floor = (metric_floors or {}).get(name, counted_floor(floor_pct) if metric.counted else floor_pct)
        comparisons: list[Comparison | None] = []
        for side in others:
            values = side.values(name)
            if not len(values) or name in summaries:
                comparisons.append(None)
            elif metric.counted:
                # A count's noise is measured from its repetitions (stats.counted).
                comparisons.append(compare_counted(base_values, values, metric, alpha=alpha, confidence=confidence,
                                                   floor_pct=floor))
            else:
                # Paired values are judged by their pairs; otherwise runs are the unit.
                comparisons.append(
                    compare(base_values, values, metric, alpha=alpha, confidence=confidence, floor_pct=floor,
                            paired=paired, base_runs=None if paired else base.run_labels(name),
                            other_runs=None if paired else side.run_labels(name)))
        rows.append(MetricRow(metric, source, summarize(base_values), comparisons))
    rows.sort(key=lambda row: row.source != "benchmark")
    first = base.runs[0].info
    headline = headline_rows(rows, headline_names(first.benchmark))
    rows = family_controlled_together(rows, alpha, headline)
    notes = []
    single = [side.name for side in sides if len(side.runs) == 1]
    if single and not paired and not all(row.metric.counted for row in rows):
        notes.append(one_run_note(single))
    adaptive = [side.name for side in sides if any(run.settings.get("repeat") == "auto" for run in side.runs)]
    if adaptive:
        notes.append(
            f"{' and '.join(adaptive)}: --repeat auto stopped on the interval's width, which raises the "
            "false-verdict rate up to about 3x at α=0.01 when both sides did (docs/statistics.md, adaptive run "
            "count); treat a change near the floor with care, or compare with `ab`"
        )
    if summaries & {row.metric.name for row in rows}:
        notes.append(f"{', '.join(sorted(summaries))}: imported as a summary (a mean, without samples), so not "
                     "compared")
    if note := family_note(rows, headline, alpha):
        notes.append(note)
    base_profile = side_profile(base, store)
    other_profiles = [side_profile(side, store) for side in others]
    return CaseComparison(
        benchmark=first.benchmark,
        case_key=first.case_key,
        sides=sides,
        rows=rows,
        differences=[side_differences(base, side, store) for side in others],
        profile_shifts=[shifts(base_profile.symbols, other.symbols) for other in other_profiles],
        chain_shifts=[shifts(base_profile.chains, other.chains) for other in other_profiles],
        notes=notes,
        alpha=alpha,
        confidence=confidence,
    )


def one_run_note(sides: list[str]) -> str:
    """What a comparison with sides of one run must say: the assumption it made."""
    from perfline.stats.two_sample import ASSUMED_BETWEEN_RUN_CV_PCT

    return (f"{' and '.join(sides)}: one run, so the variation between runs is not measured; "
            f"{ASSUMED_BETWEEN_RUN_CV_PCT:g}% is assumed (docs/statistics.md). `perfline ab` "
            "interleaves the sides and needs no assumption; several runs a side measure it.")


def headline_names(benchmark: str) -> frozenset[str] | None:
    """The benchmark's headline metrics; None when perfline does not know the benchmark
    (a result imported from another tool) or cannot load it."""
    from perfline.benchmarks import BENCHMARKS

    if benchmark not in BENCHMARKS:
        return None
    try:
        return BENCHMARKS.get(benchmark).headline_names()
    except (LookupError, ImportError, AttributeError):
        return None


def headline_rows(rows: list[MetricRow], names: frozenset[str] | None) -> set[int]:
    """Rows tested at alpha each: the benchmark's rows among its headline metrics, or
    all its rows when none of them is one (an unknown benchmark, or a `command` job whose
    metric has its own name)."""
    own = {i for i, row in enumerate(rows) if row.source == "benchmark"}
    named = {i for i in own if names is not None and rows[i].metric.name in names}
    return named or own


def family_controlled_together(rows: list[MetricRow], alpha: float, headline: set[int]) -> list[MetricRow]:
    """The rows not in `headline` judged as one family by Benjamini–Hochberg, per
    compared side (stats.multiplicity), at FAMILY_ALPHA_SHARE of alpha. Headline rows
    are left as they are."""
    from perfline.stats.multiplicity import benjamini_hochberg
    from perfline.stats.two_sample import rejudged

    family = [i for i in range(len(rows)) if i not in headline]
    if not family:
        return rows
    level = alpha * FAMILY_ALPHA_SHARE
    judged = [list(row.others) for row in rows]
    for side in range(len(rows[0].others)):
        tested = [(i, c) for i in family if (c := rows[i].others[side]) is not None]
        passes = benjamini_hochberg([c.p_value for _, c in tested], level)
        for (i, comparison), ok in zip(tested, passes, strict=True):
            judged[i][side] = rejudged(comparison, ok)
    return [replace(row, others=others) for row, others in zip(rows, judged, strict=True)]


def family_note(rows: list[MetricRow], headline: set[int], alpha: float) -> str | None:
    """The sentence a table's reader needs about the levels its rows were tested at."""
    family = [row for i, row in enumerate(rows) if i not in headline]
    if not family:
        return None
    own = [row.metric.name for row in family if row.source == "benchmark"]
    what = ", ".join(own[:3]) + (f" and {len(own) - 3} more" if len(own) > 3 else "")
    members = " and ".join(part for part in (what, "the monitor metrics" if len(own) < len(family) else "") if part)
    if not headline:
        return f"{members}: judged as one family (Benjamini–Hochberg at α={alpha * FAMILY_ALPHA_SHARE:g})"
    names = ", ".join(rows[i].metric.name for i in sorted(headline))
    return (f"{members}: judged as one family (Benjamini–Hochberg at α={alpha * FAMILY_ALPHA_SHARE:g}); "
            f"the headline {names} each at α={alpha:g}")


class SideProfile(NamedTuple):
    """A side's profiles, symbols and chains, one share table per unit."""

    symbols: list[dict[Symbol, float]]
    chains: list[dict[Chain, float]]


def side_profile(side: Side, store: Store) -> SideProfile:
    """The profiles a side's shifts are measured over: each profiled run's mean profile
    when it has several (runs are the unit, as for its metrics), else its one profiled
    run's repetitions. Runs profiled before chains were kept add no chains."""
    profiled = store.profiled([run.info.id for run in side.runs])
    ids = [run.info.id for run in side.runs if run.info.id in profiled]
    if len(ids) == 1:
        return SideProfile(store.profile_repetitions(ids[0]), store.chain_repetitions(ids[0]))
    return SideProfile([shares(store.profile(i)) for i in ids],
                       [chains for i in ids if (chains := shares(store.chains(i)))])


def side_differences(base: Side, other: Side, store: Store) -> list[Difference]:
    found = differences(base.description(), other.description(), (base.load(), other.load()))
    base_configs, other_configs = base.config_hashes(), other.config_hashes()
    if len(base_configs) == 1 and len(other_configs) == 1 and base_configs != other_configs:
        a = store.kernel_config(base_configs.pop())
        b = store.kernel_config(other_configs.pop())
        if a is not None and b is not None:
            found += config_differences(a, b)
    return found


def sides_from_runs(store: Store, run_ids: list[int]) -> list[Side]:
    return [Side(f"run {run_id}", [store.get_run(run_id)]) for run_id in run_ids]


def sides_by_label(store: Store, labels: list[str]) -> list[list[Side]]:
    """Per case present under every label: one side per label (its runs pooled)."""
    return _sides_per_case(store, [(label, store.find_runs(label=label)) for label in labels])


def sides_by_kernel(store: Store, kernels: list[str]) -> list[list[Side]]:
    """Per case run on every kernel (booted by target qemu): one side per kernel."""
    return _sides_per_case(store, [(kernel, store.find_runs(vm_kernel=kernel)) for kernel in kernels])


def _sides_per_case(store: Store, groups: list[tuple[str, list[int]]]) -> list[list[Side]]:
    """Per case that every group has runs of: one side per group, in the given order."""
    cases = [store.run_cases(run_ids) for _, run_ids in groups]
    common = set.intersection(*(set(found.values()) for found in cases))
    sides: list[list[Side]] = []
    for case in sorted(common):
        sides.append([])
        for (name, run_ids), found in zip(groups, cases, strict=True):
            read = store.get_runs([i for i in run_ids if found.get(i) == case])
            sides[-1].append(Side(name, read.runs, read.columns))
    return sides
