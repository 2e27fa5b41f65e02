"""A kernel tracker on this machine with target kexec: each tested commit is a boot.

A case of target kexec at a commit is measured in a boot of that commit's kernel: the
pass checks and starts the boot (labelled with the tracker's name, the commit as its
kernel commit, one boot of the tracker's `track` kexec series) and raises
MachineBooting, which stops the pass there, not as a crash. After the boot `perfline
resume` measures the case on that kernel, reboots into the default, and there carries
the tracker's pass on from the store (the commit's case is done, so the pass goes to
the next case, the next commit, then judging and narrowing). A commit whose kernel did
not boot is untestable (testing.pending leaves it out, store.boot_failed_commits).

A change found is confirmed over boots (analysis.kexec_confirm: an ab over kexec boots
of the two tested commits' kernels), which `perfline resume` carries from block to
block; after the last the tracker's pass goes on and judges it into the record, then
bisects with one boot a probe (bisect.kexec_probe).
"""

from __future__ import annotations

from typing import NoReturn

from perfline.records.job import Case
from perfline.runner.kexec_resume import BootSteps, MachineBooting, check, start
from perfline.runner.kexec_series import open_series
from perfline.store import Store
from perfline.targets import machine_settings

KIND = "track"


def boot(store: Store, name: str, case: Case, sha: str, steps: BootSteps) -> NoReturn:
    """Check and start the boot that measures `case` (its kernel set) at `sha`."""
    cases, settings = [case], machine_settings.load()
    check(store, cases, settings, steps.root)  # before the series row: a refusal writes nothing
    series = open_series(store, KIND, "tracker", name, name, steps)
    planned = start(store, cases, settings, label=name, kernel_commit=sha, root=steps.root, stage=steps.stage,
                    boot=steps.boot, reboot=steps.reboot, series=(series, len(store.series_boots(series))))
    raise MachineBooting(planned)


def tracker_of(settings: dict[str, object]) -> str:
    """The tracker a `track` series carries on."""
    return str(settings["tracker"])


def end_series(store: Store, name: str) -> None:
    """A pass that ended without booting: the tracker's open series is done (the next
    pass that boots starts another)."""
    for series in store.open_kexec_series(KIND):
        if tracker_of(series.settings) == name:
            store.end_kexec_series(series.id, "done")

