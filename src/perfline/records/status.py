"""The life cycles of runs, regression records and bisections, as stored and shown."""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """running -> completed | failed | interrupted. Finished repetitions are always kept."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"  # benchmark error (stderr tail kept), refused tunable
    # Ctrl-C, SIGTERM, a dead process found later, or the interleaved partner failed.
    INTERRUPTED = "interrupted"


class RegressionStatus(StrEnum):
    """A regression record's triage: new -> confirmed -> bisected -> fixed, or false-alarm."""

    NEW = "new"
    CONFIRMED = "confirmed"
    FALSE_ALARM = "false-alarm"
    BISECTED = "bisected"
    # A tracker's bisection spent its runs before it was sure: the record holds its best
    # guess; `regressions mark ID confirmed` sends it back to be bisected again.
    BUDGET = "budget"
    FIXED = "fixed"


class BisectionStatus(StrEnum):
    RUNNING = "running"
    FOUND = "found"  # the culprit's posterior reached the confidence and the A/B confirmed it
    # As found, but commits next to the first bad one could not be built or run: the
    # change is in one of them or in it (git bisect's "could be any of"), never guessed.
    RANGE = "range"
    # The posterior reached the confidence, but the culprit's own samples do not differ
    # from its parent's: the model's answer is not to be acted on without a look.
    UNCONFIRMED = "not-confirmed"
    BUDGET = "budget"  # max_runs spent first; the result is the best guess
    NO_CHANGE = "no-change"  # the endpoints do not differ beyond their noise
    # It could not go on: an endpoint does not build, the benchmark cannot run there.
    FAILED = "failed"
