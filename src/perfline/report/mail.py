"""Sending a report as e-mail: multipart text + HTML through SMTP.

The server and login come from the command line or PERFLINE_SMTP_HOST, _PORT, _USER,
_PASSWORD and _STARTTLS (1 to upgrade the connection), and the sender from
PERFLINE_MAIL_FROM. A failure raises MailError with the reason; the caller decides
whether to retry (a tracker keeps the message in the store's outbox).
"""

from __future__ import annotations

import os
import smtplib
import socket
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import make_msgid

from perfline.records.errors import UserError

DEFAULT_PORT = 25
TIMEOUT_S = 30.0


class MailError(RuntimeError):
    pass


@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int = DEFAULT_PORT
    user: str | None = None
    password: str | None = None
    starttls: bool = False
    sender: str = "perfline@localhost"

    @classmethod
    def resolve(cls, smtp: str | None, sender: str | None) -> SmtpSettings:
        """`smtp` HOST[:PORT] (else PERFLINE_SMTP_HOST/_PORT, else localhost:25)."""
        env = os.environ
        host, _, port = (smtp or env.get("PERFLINE_SMTP_HOST", "localhost")).partition(":")
        port = port or env.get("PERFLINE_SMTP_PORT", str(DEFAULT_PORT))
        if not port.isdigit():
            raise UserError(f"--smtp {smtp}: give HOST:PORT with a port number")
        return cls(host=host, port=int(port), user=env.get("PERFLINE_SMTP_USER"),
                   password=env.get("PERFLINE_SMTP_PASSWORD"),
                   starttls=env.get("PERFLINE_SMTP_STARTTLS", "0") in ("1", "true", "yes"),
                   sender=sender or env.get("PERFLINE_MAIL_FROM", f"perfline@{socket.getfqdn()}"))


def message(subject: str, text: str, html: str | None, sender: str, recipients: list[str]) -> EmailMessage:
    mail = EmailMessage()
    mail["Subject"] = subject
    mail["From"] = sender
    mail["To"] = ", ".join(recipients)
    mail["Message-ID"] = make_msgid(domain="perfline")
    mail.set_content(text)
    if html is not None:
        mail.add_alternative(html, subtype="html")
    return mail


def send(settings: SmtpSettings, mail: EmailMessage) -> None:
    try:
        with smtplib.SMTP(settings.host, settings.port, timeout=TIMEOUT_S) as smtp:
            if settings.starttls:
                smtp.starttls()
            if settings.user:
                smtp.login(settings.user, settings.password or "")
            smtp.send_message(mail)
    except (OSError, smtplib.SMTPException) as exc:
        raise MailError(f"cannot send mail through {settings.host}:{settings.port}: {exc}") from None
