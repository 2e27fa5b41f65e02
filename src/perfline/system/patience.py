"""Waiting out a server that went away: one backoff for everything that waits for one."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def patiently(attempt: Callable[[], T], lost: Callable[[BaseException], bool], wait_s: float,
              on_lost: Callable[[BaseException], None] | None = None) -> T:
    """`attempt()` until it succeeds. A failure `lost` calls the server's absence is
    tried again after a pause (0.2 s, doubling to 2 s) for up to `wait_s` in all, each
    one told to `on_lost` first; any other failure is raised at once."""
    deadline = time.monotonic() + wait_s
    pause = 0.2
    while True:
        try:
            return attempt()
        except Exception as exc:
            if not lost(exc) or time.monotonic() + pause > deadline:
                raise
            if on_lost is not None:
                on_lost(exc)
            time.sleep(pause)
            pause = min(pause * 2, 2.0)
