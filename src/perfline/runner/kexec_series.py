"""`ab` with target kexec on one machine: the sides run on different kernels, so each
block of repetitions is one boot (runner.kexec_resume), and the blocks are interleaved
as `ab` interleaves its pairs (AB, BA, AB, …: a drift of the machine over the hours of
boots falls on both sides alike). Every block boots from the default kernel and goes
back to it, so each side's blocks start from the same state. The plan lives in the
store (store.kexec_boots: kexec_series) before the first boot; after every boot,
`perfline resume` measures the block, the machine reboots into its default kernel, and
there `go_on` boots the next block, until the last one is back and the sides are
compared (analysis.kexec_ab). A block whose kernel does not boot ends the ab `failed`, with why.
"""

from __future__ import annotations

from dataclasses import replace

from perfline.records.job import Case, case_from_json, case_to_json
from perfline.runner.kexec_resume import THIS_MACHINE, BootSteps, check, start
from perfline.runner.loop import pair_order
from perfline.store import Store
from perfline.store.kexec_boots import KexecBoot, KexecSeries
from perfline.targets import kexec, local
from perfline.targets.machine_settings import MachineSettings


def open_series(store: Store, kind: str, key: str, owner: int | str, label: str, steps: BootSteps) -> int:
    """The open series of `kind` whose settings name `owner` under `key` (a bisection's,
    a tracker's: its boots' link to it, for `perfline resume`), made at its first boot."""
    for series in store.open_kexec_series(kind):
        if str(series.settings[key]) == str(owner):
            return series.id
    return store.plan_kexec_series(local.machine_id(steps.root), kind, [], {key: owner}, label, None).id


def block_sizes(pairs: int, blocks: int) -> list[int]:
    """`pairs` repetitions a side over `blocks` boots a side, as even as they divide."""
    base, extra = divmod(pairs, blocks)
    return [base + (1 if i < extra else 0) for i in range(blocks)]


def plan_steps(case_a: Case, case_b: Case, pairs: int, blocks: int) -> list[dict[str, object]]:
    """Every block in boot order: its side and its case (the side's, `repeat` the block's size)."""
    steps: list[dict[str, object]] = []
    for size, order in zip(block_sizes(pairs, blocks), pair_order(blocks), strict=True):
        for side in order:
            case = case_a if side == "A" else case_b
            steps.append({"side": side, "case": case_to_json(replace(case, repeat=size))})
    return steps


def start_ab(store: Store, case_a: Case, case_b: Case, pairs: int, blocks: int, settings: MachineSettings, *,
             label: str | None, kernel_commit: str | None, compare: dict[str, object],
             steps: BootSteps = THIS_MACHINE) -> tuple[KexecSeries, KexecBoot]:
    """Check both sides' boots, write the plan, boot the first block. A check that fails
    is a KexecRefused before anything is written; a first boot that does not start
    leaves the series `abandoned`."""
    for case in (case_a, case_b):
        check(store, [case], settings, steps.root)
    series = store.plan_kexec_series(local.machine_id(steps.root), "ab", plan_steps(case_a, case_b, pairs, blocks),
                                     compare, label, kernel_commit)
    try:
        boot = _boot(store, series, 0, settings, steps)
    except BaseException as exc:
        store.end_kexec_series(series.id, "abandoned", f"the first block's boot did not start: {exc}")
        raise
    return series, boot


def go_on(store: Store, boot: KexecBoot, settings: MachineSettings, steps: BootSteps = THIS_MACHINE) -> str | None:
    """After `perfline resume` closed a block's boot (back on the default kernel, or the
    kernel did not boot): the next block's boot, or the end of the ab. What happened,
    to say; None for a boot of no open series."""
    if boot.series_id is None or boot.series_step is None:
        return None
    series = store.kexec_series(boot.series_id)
    if series.state != "open" or boot.state not in ("returned", "boot-failed"):
        return None
    block, total = boot.series_step + 1, len(series.steps)
    if boot.state == "boot-failed":
        error = f"block {block} of {total} ({series.steps[boot.series_step]['side']}, {boot.kernel}) did not boot"
        store.end_kexec_series(series.id, "failed", f"{error}: {boot.error}")
        return f"ab series {series.id} failed: {error}; its runs so far stay in the store"
    if block == total:
        store.end_kexec_series(series.id, "done")
        return f"ab series {series.id}: all {total} blocks measured; comparing"
    try:
        following = _boot(store, series, block, settings, steps)
    except kexec.KexecRefused as exc:
        store.end_kexec_series(series.id, "failed", f"block {block + 1} could not boot: {exc.message}")
        return f"ab series {series.id} failed: block {block + 1} could not boot: {exc.message}"
    return (f"ab series {series.id}: block {block} of {total} back; booting block {block + 1} "
            f"({series.steps[block]['side']}, {following.kernel}) as kexec boot {following.id}")


def _boot(store: Store, series: KexecSeries, step: int, settings: MachineSettings, steps: BootSteps) -> KexecBoot:
    return start(store, [case_from_json(series.steps[step]["case"])], settings, label=series.label,
                 kernel_commit=series.kernel_commit, fleet_attempt=steps.fleet_attempt, root=steps.root,
                 stage=steps.stage, boot=steps.boot, reboot=steps.reboot, series=(series.id, step))
