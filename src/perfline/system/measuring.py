"""One measurement at a time on a machine.

Two perfline commands measuring on one machine at once (two trackers' passes that cron
started together, a bisection beside a `perfline run`) disturb each other's numbers, and
neither run can tell: each sees a slower machine and stores it as its commit's level. So
every run measures holding the machine's measuring lock, from its set-up to its last
repetition, and so does every build (a `make -j` is the heaviest load perfline makes); a
run or build that finds the lock held waits its turn, saying for whom. The runs of two
commands then alternate, each one whole.

The lock is the machine's, whichever user runs perfline: /run/lock (the place the FHS
gives lock files that users share), else the temporary directory. It is an flock, which
the kernel drops with its holder, so a killed run never leaves it held.
PERFLINE_MEASURE_LOCK names another file: machines simulated on one host (the fleet
tests' workers, `bench/track_chaos.py --jobs 2`) each have their own.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from perfline.records.errors import UserError
from perfline.system.files import held_in_turn

LOCK_ENV = "PERFLINE_MEASURE_LOCK"
SHARED_DIR = Path("/run/lock")
NAME = "perfline-measure.lock"



class _Holding:
    """How deep this process is in measuring: a run inside a run (none today) must not
    wait for the lock its own process holds, which an flock taken twice would."""

    depth = 0


def lock_path() -> Path:
    if named := os.environ.get(LOCK_ENV):
        return Path(named)
    if os.access(SHARED_DIR, os.W_OK | os.X_OK):
        return SHARED_DIR / NAME
    return Path(tempfile.gettempdir()) / NAME


@contextmanager
def measuring_alone(what: str, waiting: Callable[[str], None]) -> Iterator[None]:
    """Hold the machine's measuring lock while doing `what` ("measuring tbench (demo)",
    "building 1a2b3c4d5e6f of linux"); `waiting` is told, once, when another process holds
    it, what that one is doing, its pid and since when."""
    if _Holding.depth:
        _Holding.depth += 1
        try:
            yield
        finally:
            _Holding.depth -= 1
        return
    path = lock_path()
    with ExitStack() as held:
        # Only taking the lock is the lock's error: one raised while measuring is not.
        try:
            held.enter_context(held_in_turn(path, what, lambda holder: waiting(
                f"waiting for the machine: perfline is {holder or 'using it'} (a measurement beside it would be "
                f"disturbed; {path})")))
        except OSError as exc:
            raise UserError(f"the measuring lock cannot be made: {exc.strerror}; set {LOCK_ENV} to a file in a "
                            "writable directory, or unset it", LOCK_ENV) from None
        _Holding.depth = 1
        try:
            yield
        finally:
            _Holding.depth = 0
