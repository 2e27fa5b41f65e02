"""A kernel tracker's tested commit as a fleet job (`kind: kernel`): the machine boots it.

The worker that takes the job gets the commit's kernel (from the fleet's shared image
directory, where another worker of any class may have put it, keyed by the config's
content and the commit; else it builds it, as a kernel tracker does, and puts it there),
registers it, and boots it with target kexec: the boot is written to the store with the
job's attempt, then the machine goes down and the worker with it. After the boot,
`perfline resume` measures and ends the attempt and the job (`end_job`); a kernel that
did not come up ends the job `failed`, its error starting `boot-failed`: an answer about
the commit, never retried. Back on its default kernel the worker starts again, runs its
health job there, and takes the next job.

While its machine boots, a job's worker is silent: the stalled sweep leaves a job whose
attempt is in an open boot alone for `$PERFLINE_FLEET_BOOT_S` (3600 s: the boot and the
measuring) since the boot last moved, and then ends it `boot-failed` too (the machine did
not come back), never queued again for another machine to die of.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from perfline.builds import kernel
from perfline.builds.worktree import Build
from perfline.fleet.queue import FleetQueue
from perfline.fleet.trees import TreeFailed, local_repo
from perfline.records.job import Case, case_from_json, case_to_json
from perfline.records.status import RunStatus
from perfline.runner import kexec_resume
from perfline.runner.kexec_resume import BootSteps, MachineBooting
from perfline.store import Store
from perfline.store.kexec_boots import OPEN_STATES, KexecBoot
from perfline.system.env_settings import env_number
from perfline.system.files import locked
from perfline.targets import machine_settings

KIND = "kernel"
BOOT_FAILED = "boot-failed"
BOOT_S_ENV = "PERFLINE_FLEET_BOOT_S"
IMAGES_ENV = "PERFLINE_FLEET_IMAGES"
Say = Callable[[str], None]


def job_args(case: Case, label: str, commit: str, repo: str, config: str) -> dict[str, Any]:
    """The job of one case of a kernel tracker at one commit; the config travels as text,
    so a machine that cannot reach the tracker's files builds the same kernel."""
    return {"kind": KIND, "case": case_to_json(case), "label": label, "kernel_commit": commit,
            "tree": {"repo": repo, "commit": commit, "config": config}}


def images_dir() -> Path | None:
    """The fleet's shared directory of built kernels ($PERFLINE_FLEET_IMAGES, `worker --images`)."""
    value = os.environ.get(IMAGES_ENV)
    return Path(value) if value else None


def image_for(tree: dict[str, Any], images: Path | None, say: Say) -> Path:
    """The commit's kept build (bzImage, config, log): from the shared directory, else
    built here and put there for the others."""
    config = kernel.keep_config_bytes(str(tree["config"]).encode())
    commit = str(tree["commit"])
    shared = None if images is None else images / config.stem / commit
    if shared is not None and (shared / kernel.KEPT_IMAGE).is_file():
        say(f"{commit[:12]}: kernel taken from {shared}")
        return shared
    builder = SharedBuilder(local_repo(str(tree["repo"]), commit), config, images, say)
    built = builder.build(commit)
    if not built.ok:
        raise TreeFailed(f"{commit[:12]} does not build:\n{built.log_tail}")
    return builder.kept(commit)


class SharedBuilder(kernel.KernelBuilder):
    """A machine's kernel builds with the fleet's shared image directory: a commit's
    build taken from there when another machine put it there, else built here and put
    there for the others (a bisection's probes on a lab machine build through it too)."""

    def __init__(self, repo: Path, config: Path, images: Path | None, say: Say) -> None:
        super().__init__(repo, kernel.build_command(config), announce=say)
        self.shared = None if images is None else images / config.stem

    def build(self, sha: str) -> Build:
        shared = None if self.shared is None else self.shared / sha
        if shared is not None and (shared / kernel.KEPT_IMAGE).is_file():
            with locked(self.root / ".locks" / sha):
                if self.recorded(sha) is None:
                    shutil.rmtree(self.kept(sha), ignore_errors=True)
                    shutil.copytree(shared, self.kept(sha))
                    self.record(sha, Build(True, 0.0, f"taken from {shared}", cached=True))
                    self.announce(f"{sha[:12]}: kernel taken from {shared}")
        built = super().build(sha)
        if built.ok and shared is not None and not (shared / kernel.KEPT_IMAGE).is_file():
            _publish(self.kept(sha), shared)
        return built


def _publish(kept: Path, shared: Path) -> None:
    """Copied beside, then renamed into place: a reader never sees half an image."""
    partial = shared.with_name(f"{shared.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    shared.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(kept, partial)
    try:
        partial.rename(shared)
    except OSError:  # another machine put it there first: the same build
        shutil.rmtree(partial, ignore_errors=True)


def booted_case(tree: dict[str, Any], commit: str, label: str | None, case: Case, images: Path | None,
                say: Say) -> Case:
    """`case` as a boot of `commit`'s kernel: the image got (image_for) and registered
    as the tracker registers it (`track-LABEL-SHA12`)."""
    kept = image_for({**tree, "commit": commit}, images, say)
    name = kernel.register(kept, f"track-{label or 'fleet'}-{commit[:12]}", commit).name
    return replace(case, boot_kernel=name)


def boot(store: Store, args: dict[str, Any], say: Say, steps: BootSteps, images: Path | None) -> NoReturn:
    """Get the kernel, check and stage it, write the boot with the job's attempt
    (`steps.fleet_attempt`), boot: raises MachineBooting once the machine is going down,
    KexecRefused (nothing changed) or TreeFailed when it cannot."""
    commit = str(args["tree"]["commit"])
    case = booted_case(args["tree"], commit, args.get("label"), case_from_json(args["case"]), images, say)
    planned = kexec_resume.start(store, [case], machine_settings.load(), label=args.get("label"),
                                 kernel_commit=commit, fleet_attempt=steps.fleet_attempt, root=steps.root,
                                 stage=steps.stage, boot=steps.boot)
    raise MachineBooting(planned)


def end_job(store: Store, queue: FleetQueue, boot: KexecBoot) -> str | None:
    """After `perfline resume` measured (or found the kernel did not boot): the boot's
    attempt and fleet job end as it went. What was done, for the log; None when the
    boot is no kernel job's or not over. A boot of a series (an ab's block, a
    bisection's probe) is one of many of a job the worker carries on (fleet.kernel_narrowing)."""
    if boot.fleet_attempt is None or boot.series_id is not None:
        return None
    error: str | None
    if boot.state == BOOT_FAILED:
        state, error = "failed", f"{BOOT_FAILED}: {boot.error}"
    elif boot.state == "measured":
        runs = [store.get_run(run_id) for run_id in boot.run_ids]
        failed = [run for run in runs if run.info.status != RunStatus.COMPLETED]
        state = "failed" if failed or not runs else "succeeded"
        error = None if not failed else f"run {failed[0].info.id} {failed[0].info.status}: {failed[0].error}"
    else:
        return None
    attempt = store.attempt(boot.fleet_attempt)
    if not store.end_attempt(attempt.id, state, error):
        return f"fleet job {attempt.job_id}: was ended meanwhile ({attempt.state}); left as it is"
    queue.finish(attempt.job_id, state)
    return f"fleet job {attempt.job_id}: {state}" + (f": {error}" if error and state == "failed" else "")


def overdue(boot: KexecBoot, now: datetime | None = None) -> bool:
    """Whether a booting machine has been silent too long to be coming back."""
    return ((now or datetime.now(UTC)) - boot.updated_at).total_seconds() > boot_timeout()


def boot_timeout() -> float:
    """$PERFLINE_FLEET_BOOT_S (3600 s: the boot and the measuring), read when used."""
    return env_number(BOOT_S_ENV, 3600.0)


def end_overdue(store: Store, queue: FleetQueue, job_id: int, boot: KexecBoot) -> bool:
    """The machine never came back from the job's kernel: the job ends `boot-failed`
    (the kernel may well have killed it; another machine is not offered it). Or it came
    back from one of a narrowing job's boots and its worker never took the job up again."""
    assert boot.fleet_attempt is not None
    limit = boot_timeout()
    if boot.state in OPEN_STATES:
        error = (f"{BOOT_FAILED}: the machine did not come back from {boot.kernel} within {limit:g} s "
                 f"(${BOOT_S_ENV}); kexec boot {boot.id} was {boot.state}")
    else:
        error = (f"its machine's worker did not take the job up again within {limit:g} s "
                 f"(${BOOT_S_ENV}) after kexec boot {boot.id} ({boot.state})")
    if not store.end_attempt(boot.fleet_attempt, "failed", error):
        return False
    queue.finish(job_id, "failed")
    return True
