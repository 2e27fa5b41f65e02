"""Progress of a real run when nobody watches a terminal: a log file, a timer's journal."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from perfline.cli.progress import ProgressObserver
from perfline.jobs import expand
from perfline.jobs.command_line import CommandLineJob, build_job
from perfline.records.status import RunStatus
from perfline.runner import RunContext, execute
from perfline.store import Store
from perfline.targets import local


def _run_logged(tmp_path: Path, terminal: bool) -> str:
    """Two repetitions of 1.2 s after a warm-up as long, the heartbeat every 0.2 s (the
    CLI's is every 60 s) and the estimate after a warm-up longer than 0.5 s (30 s)."""
    job, _ = build_job(CommandLineJob("command", params=["cmd=sleep 1.2; echo 1"], no_monitors=True,
                                      repeat="2", warmup=1))
    cases = expand(job)
    log = io.StringIO()
    console = Console(file=log, width=300, force_terminal=terminal)
    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    with ProgressObserver(console, cases, heartbeat_s=0.2, estimate_after_s=0.5) as observer:
        outcome = execute(cases[0], RunContext(store=store, fingerprint=local.fingerprint, observer=observer))
    assert outcome.status == RunStatus.COMPLETED and outcome.repetitions == 2
    return log.getvalue()


def test_off_a_terminal_a_long_repetition_says_where_it_is(tmp_path: Path) -> None:
    text = _run_logged(tmp_path, terminal=False)
    estimate = re.search(r"run \d+: the warm-up took (\d\.\d) s; at that pace the job's 2 remaining "
                         r"step\(s\) take about (\d\.\d) s", text)
    assert estimate, text
    assert float(estimate[1]) >= 1.2 and abs(float(estimate[2]) - 2 * float(estimate[1])) <= 0.11
    beats = re.findall(r"run \d+ command: (warm-up 1/1|repetition [12]/2), (\d\.\d) s into it"
                       r"(?: \(expected (\d\.\d) s, as the warm-up took\))?; the run started", text)
    # Each step lasts six heartbeats; even on a loaded machine every step says so at least once.
    assert {what for what, _, _ in beats} == {"warm-up 1/1", "repetition 1/2", "repetition 2/2"}, text
    for what, into, expected in beats:
        assert float(into) <= 1.2 + 1.0
        assert (expected == "") == (what == "warm-up 1/1")
        if expected:
            assert float(expected) == float(estimate[1])


def test_on_a_terminal_the_bar_says_it_and_no_line_is_added(tmp_path: Path) -> None:
    text = _run_logged(tmp_path, terminal=True)
    assert "into it" not in text
    assert "the warm-up took" in text  # the estimate is news on a terminal too
