"""The outbox: mail a tracker queued, kept until a send succeeds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select

from perfline.store.engine import Sessions, by_id
from perfline.store.schema import OutboxRow


@dataclass(frozen=True)
class Letter:
    id: int
    key: str
    recipients: list[str]
    subject: str
    text: str
    html: str | None
    attempts: int
    last_error: str | None


class OutboxQueries:
    """Mixed into Store; uses its session factory."""

    _session: Sessions

    def queue_mail(self, key: str, recipients: list[str], subject: str, text: str, html: str | None) -> bool:
        """Queue a message unless one with this key was queued before; whether it was new."""
        with self._session.begin() as session:
            if session.scalar(select(OutboxRow.id).where(OutboxRow.key == key)) is not None:
                return False
            session.add(OutboxRow(key=key, recipients=recipients, subject=subject, text=text, html=html,
                                  created_at=datetime.now(UTC), sent_at=None, attempts=0, last_error=None))
            return True

    def has_mail(self, key: str) -> bool:
        with self._session() as session:
            return session.scalar(select(OutboxRow.id).where(OutboxRow.key == key)) is not None

    def unsent_mail(self) -> list[Letter]:
        with self._session() as session:
            rows = session.scalars(select(OutboxRow).where(OutboxRow.sent_at.is_(None)).order_by(OutboxRow.id))
            return [Letter(r.id, r.key, list(r.recipients), r.subject, r.text, r.html, r.attempts, r.last_error)
                    for r in rows]

    def mail_attempted(self, letter_id: int, error: str | None) -> None:
        """Record a send: done (error None), or failed with its reason, to be retried."""
        with self._session.begin() as session:
            row = by_id(session, OutboxRow, letter_id)
            assert row is not None
            row.attempts += 1
            row.last_error = error
            if error is None:
                row.sent_at = datetime.now(UTC)
