"""Running external tools: one place for timeouts, error tails and missing-tool messages."""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

STDERR_TAIL_LINES = 40
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# perfline's load hog (runner.load): a shell busy loop, no interpreter start-up, nothing
# but user time, and trivially killed. `perfline doctor` finds hogs left behind by it.
CPU_HOG = ("/bin/sh", "-c", "while :; do :; done")


class ToolMissing(RuntimeError):
    """An executable perfline needs is not installed."""


class CommandFailed(RuntimeError):
    """A command exited non-zero or timed out; carries the tail of its output."""

    def __init__(self, argv: Sequence[str], message: str, output_tail: str) -> None:
        super().__init__(f"{Path(argv[0]).name}: {message}")
        self.argv = list(argv)
        self.output_tail = output_tail


def tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def require_tool(executable: str, package: str) -> str:
    """Absolute path of `executable`, or ToolMissing naming the Debian package to install."""
    found = shutil.which(executable)
    if found is None:
        raise ToolMissing(
            f"{executable} not found: install the Debian package {package} "
            "(`make install-deps` installs everything perfline uses)"
        )
    return found


def die_with_perfline() -> Callable[[], None]:
    """A `preexec_fn` for Popen: the child is SIGKILLed when perfline dies, even by
    SIGKILL, so that nothing it starts (a VM, CPU hogs, a server) outlives its run.

    The kernel sends the signal when the *thread* that forked the child exits: start
    such children from perfline's main thread. The signal survives exec (not of a
    set-user-ID program). A perfline that died before the prctl took effect is caught
    by comparing the parent's pid.
    """
    parent = os.getpid()
    prctl = _libc().prctl  # looked up here: the child should do no more than it must

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def child_setup(tied: bool, cgroup: Path | None) -> Callable[[], None] | None:
    """A `preexec_fn` for Popen: the child dies with perfline when `tied`
    (`die_with_perfline`), and moves itself into the cgroup v2 directory `cgroup`.

    Joining before exec, in the child itself, is what makes every task the command
    forks or clones start inside the group too: a pid moved after the spawn could have
    forked already (a short-lived client, a thread) and the child would escape.
    """
    tie = die_with_perfline() if tied else None
    if cgroup is None:
        return tie
    procs = str(cgroup / "cgroup.procs")

    def preexec() -> None:
        if tie is not None:
            tie()
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")  # 0: the writing process itself
        finally:
            os.close(fd)

    return preexec


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def run(
    argv: Sequence[str],
    *,
    timeout: float | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    tied: bool = False,
    cgroup: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run to completion; raise CommandFailed with the output tail on failure or timeout.
    `tied`: the command dies with perfline (die_with_perfline; call from the main thread).
    `cgroup`: it and everything it starts run in that cgroup v2 directory (`child_setup`)."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env, check=False,
            preexec_fn=child_setup(tied, cgroup),
        )
    except subprocess.TimeoutExpired as exc:
        output = _as_text(exc.stderr) or _as_text(exc.stdout)
        raise CommandFailed(argv, f"timed out after {timeout:g}s", tail(output)) from exc
    if proc.returncode != 0:
        raise CommandFailed(
            argv, f"exited with status {proc.returncode}", tail(proc.stderr or proc.stdout)
        )
    return proc


def _as_text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
