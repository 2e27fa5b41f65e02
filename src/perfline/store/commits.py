"""Commits' subject, author and date, kept from the moment a tracker first sees them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import select

from perfline.git import Commit
from perfline.store.engine import Sessions, insert_ignoring_conflicts
from perfline.store.schema import CommitRow

# Keys per IN (...) and rows per INSERT: well under SQLite's and PostgreSQL's limits
# on bound parameters.
_CHUNK = 500


class CommitQueries:
    """Mixed into Store; uses its session factory."""

    _session: Sessions

    def remember_commits(self, commits: Iterable[Commit]) -> int:
        """Keep the commits not kept yet (the first sighting stays); returns how many were new."""
        given = {c.sha: c for c in commits}
        known = set(self.stored_commits(given))
        new = [c for sha, c in given.items() if sha not in known]
        if not new:
            return 0
        now = datetime.now(UTC)
        with self._session.begin() as session:
            for start in range(0, len(new), _CHUNK):
                # Two trackers of one tree on a fleet's store may see a commit together.
                insert_ignoring_conflicts(session, CommitRow, [
                    {"sha": c.sha, "subject": c.subject, "author": c.author,
                     "date": c.date.isoformat() if c.date else None, "seen_at": now}
                    for c in new[start:start + _CHUNK]])
        return len(new)

    def stored_commits(self, shas: Iterable[str]) -> dict[str, Commit]:
        """The kept commits among `shas` (full shas), by sha."""
        wanted = sorted(set(shas))
        found: dict[str, Commit] = {}
        with self._session() as session:
            for start in range(0, len(wanted), _CHUNK):
                for row in session.scalars(select(CommitRow).where(CommitRow.sha.in_(wanted[start:start + _CHUNK]))):
                    found[row.sha] = Commit(row.sha, row.subject, row.author,
                                            datetime.fromisoformat(row.date) if row.date else None)
        return found

