"""`perfline report`: a regression in the 0-day robot's shape, the trackers' daily summary."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

from perfline.cli.common import EXIT_FAILED, console, fail, notify, open_store
from perfline.cli.help_style import App

report_app = App(help="Reports: one regression as the 0-day robot writes it, the daily summary; "
                      "text, HTML or JSON, to a file or by e-mail.\n\nExample: perfline report regression 1")

FORMATS = ("text", "html", "json")
FormatOption = Annotated[str, typer.Option("--format", help="text, html (one self-contained file) or json.")]
OutputOption = Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")]
MailToOption = Annotated[list[str] | None, typer.Option("--mail-to", help="Mail it (text + HTML) to ADDR (repeat).")]
SmtpOption = Annotated[str | None, typer.Option(help="SMTP server HOST:PORT (default $PERFLINE_SMTP_HOST or "
                                                     "localhost:25; login from $PERFLINE_SMTP_USER/_PASSWORD).")]
FromOption = Annotated[str | None, typer.Option("--from", help="Sender (default $PERFLINE_MAIL_FROM).")]


def _emit(content: str, output: Path | None) -> None:
    if output is None:
        print(content, end="" if content.endswith("\n") else "\n")
    else:
        output.write_text(content)
        console.print(f"wrote {output}", highlight=False)


def _mail(subject: str, text: str, html: str, recipients: list[str], smtp: str | None, sender: str | None) -> None:
    from perfline.report.mail import MailError, SmtpSettings, message, send

    settings = SmtpSettings.resolve(smtp, sender)
    try:
        send(settings, message(subject, text, html, settings.sender, recipients))
    except MailError as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    console.print(f"mailed {subject!r} to {', '.join(recipients)}", highlight=False)


@report_app.command("regression")
def regression(
    regression_id: Annotated[int, typer.Argument(help="The regression record (see `perfline regressions`).")],
    fmt: FormatOption = "text",
    output: OutputOption = None,
    url: Annotated[str | None, typer.Option(help="The dashboard's address, for the link (or $PERFLINE_URL).")] = None,
    mail_to: MailToOption = None,
    smtp: SmtpOption = None,
    sender: FromOption = None,
) -> None:
    """One regression: subject, commit, machine, the LKP-style table with CI and p, the
    bisection, why (profile), and how to reproduce it.

    Example: perfline report regression 1 --format html -o regression-1.html
    """
    from perfline.report import regression_report

    if fmt not in FORMATS:
        raise fail(f"--format {fmt}: give one of {', '.join(FORMATS)}")
    store = open_store()
    report = regression_report.build(store, regression_id, url or os.environ.get("PERFLINE_URL"))
    if mail_to:
        _mail(report.subject, regression_report.text(report), regression_report.html(store, report), mail_to, smtp,
              sender)
        return
    if fmt == "json":
        _emit(json.dumps(regression_report.as_json(report), indent=2), output)
    elif fmt == "html":
        _emit(regression_report.html(store, report), output)
    else:
        _emit(regression_report.text(report), output)


@report_app.command("daily")
def daily(
    name: Annotated[str | None, typer.Argument(help="A tracker (default: all).")] = None,
    since: Annotated[str | None, typer.Option(help="From this date (YYYY-MM-DD[THH:MM]); default 24 hours ago.")
                     ] = None,
    fmt: FormatOption = "text",
    output: OutputOption = None,
    mail_to: MailToOption = None,
    smtp: SmtpOption = None,
    sender: FromOption = None,
) -> None:
    """The morning summary: per tracker the number and its graph, the commits tested, the
    regressions and improvements that changed, what is pending.

    Example: perfline report daily demo --mail-to perf@example.org
    """
    from perfline.report import daily as daily_report
    from perfline.track.summary import daily_summary

    if fmt not in ("text", "html"):
        raise fail(f"--format {fmt}: give text or html")
    try:
        start = datetime.fromisoformat(since).astimezone(UTC) if since else datetime.now(UTC) - timedelta(days=1)
    except ValueError:
        raise fail(f"--since {since}: give a date, YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
    store = open_store()
    names = [name] if name else [t.name for t in store.trackers()]
    summary = daily_summary(store, names, start, notify)
    if mail_to:
        _mail(summary.subject, daily_report.text(summary), daily_report.html(summary), mail_to, smtp, sender)
        return
    _emit(daily_report.html(summary) if fmt == "html" else daily_report.text(summary), output)
