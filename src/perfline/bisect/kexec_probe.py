"""A kernel bisection with target kexec on one machine: each probe is a boot.

A probe of a commit whose kernel has not been measured yet checks and starts a kexec
boot into that commit's build (labelled `bisect-ID`, the commit as its kernel commit,
one block of the bisection's `kexec_series`) and raises MachineBooting: the pass stops
there, not as a crash, and the bisection stays running. After the boot `perfline
resume` measures the case on that kernel, reboots into the default, and there carries
the bisection on (`perfline bisect resume` in the same process): the driver replays the
stored samples, probes the same commit again, and this time finds the boot's run, not
yet a sample, and takes its value. A commit whose kernel did not boot is untestable.
"""

from __future__ import annotations

from dataclasses import replace

from perfline.bisect.driver import BOOT_FAILED, MeasureFailed
from perfline.records.job import Case
from perfline.records.status import BisectionStatus
from perfline.runner.kexec_resume import BootSteps, MachineBooting, check, start
from perfline.runner.kexec_series import open_series
from perfline.store import Store
from perfline.store.bisections import BisectionRecord
from perfline.targets import machine_settings

KIND = "bisect"


def probe(store: Store, record: BisectionRecord, case: Case, kernel: str, sha: str, index: int,
          steps: BootSteps) -> int:
    """The run that measured `sha`'s kernel for this probe; or its boot (MachineBooting)."""
    label = f"bisect-{record.id}"
    taken = {sample.run_id for sample in store.bisect_samples(record.id)}
    for boot in store.kexec_boots_for(label, sha):
        if boot.state == "boot-failed":
            raise MeasureFailed(f"{BOOT_FAILED}: kexec boot {boot.id}: {boot.error}", untestable=True)
        fresh = [run_id for run_id in boot.run_ids if run_id not in taken]
        if boot.state in ("measured", "returned") and fresh:
            return fresh[0]
    cases, settings = [replace(case, boot_kernel=kernel)], machine_settings.load()
    check(store, cases, settings, steps.root)  # before the series row: a refusal writes nothing
    series = open_series(store, KIND, "bisection", record.id, label, steps)
    boot = start(store, cases, settings, label=label, kernel_commit=sha, fleet_attempt=steps.fleet_attempt,
                 root=steps.root, stage=steps.stage, boot=steps.boot, reboot=steps.reboot,
                 series=(series, index))
    raise MachineBooting(boot)


def bisection_of(settings: dict[str, object]) -> int:
    """The bisection a `bisect` series carries on."""
    return int(str(settings["bisection"]))



def close_series(store: Store, bisection_id: int) -> None:
    """A bisection that ended: its series of boots ends with it (`failed` with a failed
    bisection, else `done`); one still running keeps it open for its next probe."""
    status = store.bisection(bisection_id).status
    if status == BisectionStatus.RUNNING:
        return
    for series in store.open_kexec_series(KIND):
        if bisection_of(series.settings) == bisection_id:
            store.end_kexec_series(series.id, "failed" if status == BisectionStatus.FAILED else "done")
