"""Reports of a tracked regression: the 0-day-style text, HTML, JSON, e-mail.

One tracked history (examples/bisect/make-repo.sh and the tracker of issue 20) is made
for the module; its culprit's subject carries a subsystem prefix and a script tag, and
its job's command a quote-breaking string, so that every renderer meets hostile text
from the store. Mail goes to a real SMTP server (aiosmtpd) on loopback."""

from __future__ import annotations

import email
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import Message
from pathlib import Path

import html5lib
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Message as MessageHandler

from conftest import LABEL_ATTACK, SCRIPT_SUBJECT, copy_tracked, free_port

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = SCRIPT_SUBJECT
CULPRIT = 41


def perfline(where: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfline", "--db", str(where / "db"), *args], capture_output=True,
                          text=True, timeout=600, check=False, cwd=where, env={**os.environ, **(env or {})})


@pytest.fixture
def tracked(tracked_history: Path) -> Path:
    return tracked_history


def shas(where: Path) -> list[str]:
    return subprocess.run(["git", "-C", str(where / "src"), "rev-list", "--reverse", "main"], capture_output=True,
                          text=True, check=True).stdout.split()


def test_text_report_has_the_robot_s_shape_and_compare_s_numbers(tracked: Path) -> None:
    proc = perfline(tracked, "report", "regression", "1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    culprit = shas(tracked)[CULPRIT]
    assert re.fullmatch(rf"Subject: \[demo:main\] \[sched/eevdf\] {culprit[:10]}: command\.seconds "
                        r"\+\d+\.\d% regression", lines[0])
    assert f"commit: {culprit} (\"sched/eevdf: {SCRIPT}\")" in lines
    document = json.loads(perfline(tracked, "report", "regression", "1", "--format", "json").stdout)
    regression = document["regression"]
    compared = json.loads(perfline(tracked, "compare", str(regression["before_run"]), str(regression["after_run"]),
                                   "--json").stdout)
    [row] = [m for m in compared["cases"][0]["metrics"] if m["metric"] == "command.seconds"]
    other = row["others"][0]
    assert document["comparison"]["metrics"][0]["others"][0] == other
    primary = next(line for line in lines if line.endswith("  command.seconds"))
    assert f"{other['change_pct']:+7.1f}%" in primary and f"[{other['ci_pct'][0]:+.1f}, {other['ci_pct'][1]:+.1f}]" \
        in primary and other["verdict"] in primary
    assert "%stddev" in proc.stdout and "A/B of the culprit against its parent" in proc.stdout
    # `regressions --report` is the same renderer.
    assert perfline(tracked, "regressions", "--report", "1").stdout == proc.stdout


def test_the_reproduce_commands_run(tracked: Path, tmp_path: Path) -> None:
    """The printed commands, run as a reader would: the job saved as job.yaml, the
    bisection command and the compare (`--json` to read the answer)."""
    text = perfline(tracked, "report", "regression", "1").stdout
    job = text.split("job.yaml:\n", 1)[1]
    (tmp_path / "job.yaml").write_text("".join(line[2:] + "\n" for line in job.splitlines()))
    commands = text.split("to reproduce:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    bisect = next(c.strip() for c in commands if "bisect start" in c)
    shutil.copy(tracked / "db", tmp_path / "db")
    proc = subprocess.run(f"{sys.executable} -m {bisect.replace('perfline ', 'perfline --db db ', 1)} "
                          "--json", shell=True, capture_output=True, text=True, cwd=tmp_path,
                          timeout=600, env={**os.environ, "PERFLINE_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["culprit"] == shas(tracked)[CULPRIT]
    compare = next(c.strip() for c in commands if c.strip().startswith("perfline compare"))
    assert subprocess.run(f"{sys.executable} -m {compare.replace('perfline ', 'perfline --db db ', 1)}", shell=True,
                          capture_output=True, cwd=tmp_path, check=False).returncode == 0


def _html_document(text: str) -> object:
    return html5lib.parse(text, namespaceHTMLElements=False)


def test_html_report_escapes_everything_and_has_the_graph(tracked: Path) -> None:
    proc = perfline(tracked, "report", "regression", "1", "--format", "html")
    assert proc.returncode == 0, proc.stderr
    root = _html_document(proc.stdout)
    assert root.findall(".//script") == []  # type: ignore[attr-defined]
    assert not [e for e in root.iter() if any(k.startswith("on") for k in e.attrib)]  # type: ignore[attr-defined]
    images = root.findall(".//img")  # type: ignore[attr-defined]
    assert len(images) == 1 and images[0].attrib["src"].startswith("data:image/png;base64,")
    text = "".join(root.itertext())  # type: ignore[attr-defined]
    assert SCRIPT in text and LABEL_ATTACK in text


def test_daily_summary_lists_the_tracker_and_its_regression(tracked: Path) -> None:
    proc = perfline(tracked, "report", "daily")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Subject: [perfline] daily: demo: ")
    assert "6 tested in all, 0 pending" in proc.stdout
    assert re.search(rf"#1 bisected +regression +command\.seconds \+\d+\.\d% in .*culprit {shas(tracked)[CULPRIT][:12]}",
                     proc.stdout)
    html = perfline(tracked, "report", "daily", "--format", "html").stdout
    root = _html_document(html)
    assert root.findall(".//script") == [] and len(root.findall(".//img")) == 1  # type: ignore[attr-defined]


class _Inbox(MessageHandler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[Message] = []

    def handle_message(self, message: Message) -> None:
        self.messages.append(message)


@pytest.fixture
def smtp() -> Iterator[tuple[_Inbox, int]]:
    inbox = _Inbox()
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


def _parts(message: Message) -> dict[str, str]:
    parsed = email.message_from_bytes(message.as_bytes())
    return {part.get_content_type(): part.get_payload(decode=True).decode() for part in parsed.walk()
            if not part.is_multipart()}


def test_report_by_mail_has_both_parts(tracked: Path, smtp: tuple[_Inbox, int]) -> None:
    inbox, port = smtp
    proc = perfline(tracked, "report", "regression", "1", "--mail-to", "dev@example.org", "--mail-to",
                    "list@example.org", "--smtp", f"127.0.0.1:{port}", "--from", "perfline@example.org")
    assert proc.returncode == 0, proc.stderr
    [message] = inbox.messages
    subject = perfline(tracked, "report", "regression", "1").stdout.splitlines()[0].removeprefix("Subject: ")
    # A header longer than 78 characters is folded on the wire; unfolded it is the subject.
    assert " ".join(message["Subject"].split()) == subject
    assert message["To"] == "dev@example.org, list@example.org"
    parts = _parts(message)
    assert set(parts) == {"text/plain", "text/html"}
    assert "A/B of the culprit against its parent" in parts["text/plain"]
    assert _html_document(parts["text/html"]).findall(".//script") == []  # type: ignore[attr-defined]


def test_a_tracker_retries_mail_the_server_refused(tracked: Path, tmp_path: Path) -> None:
    """The tracker's `report:` mails the bisected regression and the daily summary; with
    the server down the pass still succeeds, says why, and the next pass delivers."""
    where = tmp_path / "copy"
    copy_tracked(tracked, where, cache=True)
    port = free_port()
    with (where / "tracker.yaml").open("a") as f:
        f.write(f"report:\n  mail_to: [dev@example.org]\n  smtp: 127.0.0.1:{port}\n")
    # Both passes on one local date: the summary is queued once a day (`daily-NAME-DATE`),
    # and a date that changed between them would queue and mail a third message (1 run
    # in ~10,000 at the passes' ~10 s apart). Local time about noon: 12 h from either end.
    env = {"PERFLINE_CACHE_DIR": str(where / "cache"), "TZ": f"NOON{datetime.now(UTC).hour - 12:+d}"}
    down = perfline(where, "track", "run", "tracker.yaml", "--once", env=env)
    assert down.returncode == 0, down.stderr
    assert "not sent (attempt 1)" in down.stderr and "tried again next pass" in down.stderr
    with sqlite3.connect(where / "db") as db:
        assert db.execute("SELECT count(*) FROM outbox WHERE sent_at IS NULL").fetchone()[0] == 2
    inbox = _Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        up = perfline(where, "track", "run", "tracker.yaml", "--once", env=env)
    finally:
        controller.stop()
    assert up.returncode == 0, up.stderr
    subjects = sorted(" ".join(m["Subject"].split()) for m in inbox.messages)
    assert len(subjects) == 2 and subjects[0].startswith("[demo:main] [sched/eevdf]")
    assert subjects[1].startswith("[perfline] daily: demo")
    with sqlite3.connect(where / "db") as db:
        assert db.execute("SELECT count(*), min(attempts) FROM outbox WHERE sent_at IS NOT NULL").fetchone() == (2, 2)


def test_why_profiles_the_culprit_against_its_parent(tracked: Path) -> None:
    """After the bisection the tracker interleaves the culprit and its parent with the
    perf-profile monitor. The culprit makes the same loop do 8% more work: the report
    says in one line that no function's share moved beyond noise, and shows the top
    symbols' shares of both sides; what it lists as moved has an interval excluding 0.
    (tests/test_profile_moved.py checks the judging on profiles whose truth is known.)"""
    from perfline.monitors import MONITORS, MonitorUnavailable

    try:
        MONITORS.get("perf-profile")().check()
    except MonitorUnavailable as exc:
        pytest.skip(f"perf cannot profile here: {exc}")
    document = json.loads(perfline(tracked, "report", "regression", "1", "--format", "json").stdout)
    assert document["why_runs"] is not None and document["why_judged"]
    for shift in document["why"] + document["why_chains"]:
        low, high = shift["ci_pct"]
        assert low <= shift["delta_pct"] <= high and (low > 0 or high < 0)
    shares = document["why_shares"]
    assert len(shares) >= 3 and all(s["base_pct"] >= 0 and s["other_pct"] >= 0 for s in shares)
    assert [max(s["base_pct"], s["other_pct"]) for s in shares] == sorted(
        (max(s["base_pct"], s["other_pct"]) for s in shares), reverse=True)
    with sqlite3.connect(tracked / "db") as db:
        commits = {c for (c,) in db.execute("SELECT kernel_commit FROM runs WHERE label = 'why-1'")}
    assert commits == {shas(tracked)[CULPRIT], shas(tracked)[CULPRIT - 1]}
    text = perfline(tracked, "report", "regression", "1").stdout
    line = next(line for line in text.splitlines() if line.startswith("why: "))
    source = "(the culprit's parent and the culprit interleaved"
    if document["why"]:
        # perf-profile samples every CPU: on a shared host another program's share can
        # move between the sides for real. Listed: beyond noise, strongest first.
        assert line.startswith("why: symbols whose share of busy CPU time moved beyond noise, strongest first " + source)
        strength = [min(abs(s["ci_pct"][0]), abs(s["ci_pct"][1])) for s in document["why"]]
        assert strength == sorted(strength, reverse=True)
        return
    # The culprit makes the same loop do 8% more work: no share moved beyond noise.
    assert line.startswith("why: no function's share of CPU time moved beyond noise: the culprit makes the same "
                           "code do more or slower work " + source)
    listed = text.split(line + "\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert listed[0] == "  the top symbols' shares of busy CPU time, before -> after:"
    assert len(listed[1:]) == len(shares)
    for row, share in zip(listed[1:], shares, strict=True):
        assert f"{share['base_pct']:6.2f}% -> {share['other_pct']:6.2f}%  {share['symbol']}" in row


def test_a_report_stands_on_its_own_after_the_repository_is_gone(tracked: Path, tmp_path: Path) -> None:
    """The tracker's pass kept each commit's subject, author and date: with the
    repository it followed removed, the report, its JSON and the dashboard's page still
    name the culprit."""
    from fastapi.testclient import TestClient

    from perfline.store import Store
    from perfline.web.app import create_app
    from perfline.web.assets import vendor_dir
    from perfline.web.auth import Tokens

    where = tmp_path / "copy"
    copy_tracked(tracked, where)
    culprit = shas(tracked)[CULPRIT]
    author, date = subprocess.run(["git", "-C", str(where / "src"), "log", "-1", "--format=%an%x00%cI", culprit],
                                  capture_output=True, text=True, check=True).stdout.strip().split("\0")
    # The copy's tracker follows the copy's repository, which is then removed.
    with sqlite3.connect(where / "db") as db:
        db.execute("UPDATE trackers SET repo = ?", (str(where / "src"),))
    shutil.rmtree(where / "src")
    proc = perfline(where, "report", "regression", "1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert f'commit: {culprit} ("sched/eevdf: {SCRIPT}")' in lines
    assert f"author: {author}, {date}" in lines and author == "Dev"
    document = json.loads(perfline(where, "report", "regression", "1", "--format", "json").stdout)
    assert document["culprit"] == {"sha": culprit, "subject": f"sched/eevdf: {SCRIPT}", "author": author,
                                   "date": date}
    client = TestClient(create_app(Store.open(str(where / "db")), Tokens.load(None), vendor_dir()))
    page = client.get("/regressions/1")
    assert page.status_code == 200
    text = "".join(_html_document(page.text).itertext())  # type: ignore[attr-defined]
    assert f'commit: {culprit} ("sched/eevdf: {SCRIPT}")' in text and f"author: {author}, {date}" in text
