"""A tracker's mail: the report of each regression it narrowed, and one daily summary.

Messages are queued in the store's outbox before anything is sent, once per key
(`regression-ID`, `daily-NAME-DATE`), so a mail server that is down loses nothing and
sends nothing twice: every pass tries what is unsent again, and says why it failed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from perfline.records.status import RegressionStatus
from perfline.report import daily as daily_report
from perfline.report import regression_report
from perfline.report.mail import MailError, SmtpSettings, message, send
from perfline.store import Store
from perfline.track.summary import daily_summary
from perfline.track.tracker_file import TrackerSpec

Notify = Callable[[str], None]
# A record is mailed once it has what a developer acts on: a culprit.
_NARROWED = (RegressionStatus.BISECTED, RegressionStatus.BUDGET)


def queue(store: Store, spec: TrackerSpec, now: datetime, notify: Notify) -> None:
    """Queue the reports not queued before: narrowed regressions, today's summary."""
    settings = spec.report
    if settings is None:
        return
    recipients = list(settings.mail_to)
    for r in store.regressions(tracker=spec.name):
        key = f"regression-{r.id}"
        if r.status in _NARROWED and r.kind == "regression" and not store.has_mail(key):
            report = regression_report.build(store, r.id, settings.url)
            store.queue_mail(key, recipients, report.subject, regression_report.text(report),
                             regression_report.html(store, report))
    today = now.astimezone().date()
    key = f"daily-{spec.name}-{today.isoformat()}"
    if not store.has_mail(key):
        summary = daily_summary(store, [spec.name], now - timedelta(days=1), notify)
        store.queue_mail(key, recipients, summary.subject, daily_report.text(summary), daily_report.html(summary))


def flush(store: Store, spec: TrackerSpec, notify: Notify) -> int:
    """Send what is unsent; a failure is recorded with its reason and retried next pass.
    Returns how many were sent."""
    if spec.report is None:
        return 0
    settings = SmtpSettings.resolve(spec.report.smtp, spec.report.sender)
    sent = 0
    for letter in store.unsent_mail():
        try:
            send(settings, message(letter.subject, letter.text, letter.html, settings.sender, letter.recipients))
        except MailError as exc:
            store.mail_attempted(letter.id, str(exc))
            notify(f"mail {letter.key!r} not sent (attempt {letter.attempts + 1}): {exc}; tried again next pass")
            continue
        store.mail_attempted(letter.id, None)
        notify(f"mailed {letter.subject!r} to {', '.join(letter.recipients)}")
        sent += 1
    return sent
