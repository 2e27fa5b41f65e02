"""A tracker's regression confirmed over kexec boots of one machine: an ab of the two
tested commits' kernels (runner.kexec_series: CONFIRM_BLOCKS boots a side, interleaved
AB BA AB, each block's run a unit of the comparison, so the variation between boots is
measured), judged into the record by the interleaved confirmation's rule once its last
block is back (analysis.regressions.judge_rerun).

Two callers carry the ab from boot to boot: on one machine `perfline resume` boots the
next block and the tracker's pass judges after the last (track); on the fleet the worker
that holds the tracker's confirmation job does both (fleet.kernel_narrowing).
"""

from __future__ import annotations

from typing import NoReturn

from perfline.analysis.kexec_ab import comparison
from perfline.analysis.regressions import CannotConfirm, ReRun, judge_rerun, rerun_label
from perfline.records.job import Case
from perfline.runner.kexec_resume import BootSteps, MachineBooting
from perfline.runner.kexec_series import start_ab
from perfline.store import Regression, Store
from perfline.targets import machine_settings

# A confirmation's boots a side: each block's run is a unit of the comparison, so the
# variation between boots is measured (3 a side: a t-test of 4 degrees of freedom).
CONFIRM_BLOCKS = 3
CONFIRM_ALPHA = 0.01
# Confirmations over boots a record gets: one whose block did not boot (a reset, a
# watchdog, a kernel that booted when it was tested) is started again once; a record
# whose every try failed stays `new` and says why at each pass, for a person to look at.
CONFIRM_TRIES = 2


def confirm(store: Store, name: str, regression: Regression, good: Case, bad: Case, floor_pct: float,
            steps: BootSteps) -> Regression:
    """The record's confirmation over boots: started (MachineBooting) when it has none,
    or again when its last one failed and it has had fewer than CONFIRM_TRIES; judged once
    its ab is done; the record as it is while the ab's boots go on."""
    tried = store.kexec_series_all_for("ab", "regression", regression.id)
    if not tried or (tried[0].state in ("failed", "abandoned") and len(tried) < CONFIRM_TRIES):
        _start(store, name, regression, good, bad, floor_pct, steps)
    series = tried[0]
    if series.state == "open":
        return regression
    compared = comparison(store, series)
    if series.state != "done" or compared is None:
        why = "; ".join(f"series {one.id} {one.state}: {one.error}" for one in reversed(tried))
        raise CannotConfirm(f"its ab over kexec boots, tried {len(tried)} times: {why}")
    where = f"over kexec boots (series {series.id}, {CONFIRM_BLOCKS} boots a side)"
    return judge_rerun(store, regression, compared, ReRun(f"re-run {where}", f"the re-run {where}",
                                                          f"{CONFIRM_BLOCKS} boots a side", ""), end_undecided=True)


def _start(store: Store, name: str, regression: Regression, good: Case, bad: Case, floor_pct: float,
           steps: BootSteps) -> NoReturn:
    compare = {"alpha": CONFIRM_ALPHA, "floor": floor_pct, "metric_floors": {}, "tracker": name,
               "regression": regression.id}
    pairs = good.repeat * CONFIRM_BLOCKS
    _, planned = start_ab(store, good, bad, pairs, CONFIRM_BLOCKS, machine_settings.load(),
                          label=rerun_label(regression.id), kernel_commit=None, compare=compare, steps=steps)
    raise MachineBooting(planned)
