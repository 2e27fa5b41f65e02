"""Background load: N CPU hogs beside a repetition, as the seed's `make-load` did."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from perfline.system.process import CPU_HOG, die_with_perfline


@contextmanager
def cpu_hogs(count: int) -> Iterator[list[int]]:
    """Run `count` busy loops for the duration of the block; yields their pids.

    Each hog leads its own session so that SIGKILL to its group cannot miss a child,
    and the hogs are killed and reaped even when the block raises. A perfline killed
    outright (SIGKILL, OOM) takes them along: they get SIGKILL when it dies.
    """
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            hogs.append(
                subprocess.Popen(
                    CPU_HOG,
                    start_new_session=True,
                    preexec_fn=die_with_perfline(),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        yield [hog.pid for hog in hogs]
    finally:
        for hog in hogs:
            with suppress(ProcessLookupError):
                os.killpg(hog.pid, signal.SIGKILL)
        for hog in hogs:
            hog.wait()
