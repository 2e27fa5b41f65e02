"""Holding Ctrl-C and SIGTERM back while the store commits.

Python raises KeyboardInterrupt between any two bytecodes; one raised inside a commit
can leave SQLite's write lock with a connection nobody returns, and the run's own
`interrupted` mark then waits on that lock. Blocked, the signal stays pending and is
delivered the moment the commit is done.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HELD = {signal.SIGINT, signal.SIGTERM}


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM pending until the block ends (only the main thread gets them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def leave_signals_to_main_thread() -> None:
    """Called first in a helper thread: the process's SIGINT and SIGTERM then go to the
    main thread only, and stay pending while it holds them. (A signal that another
    thread received would run its Python handler in the main thread at once, in the
    middle of a held commit.)"""
    signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
