"""Flashes: what an action of the settings area did, told once on the next page that its
browser loads (ADR 0014).

A flash is bound to the web session (by the hash the database keeps of its token), so no
other session ever sees it, and a secret in it (a new API key, a signing secret) is sealed
with the secret key, so the database never holds it in plain text. Taking a session's
flashes reads and deletes them in one statement: a reload, or a second tab, finds none.
Flashes older than ``LIFETIME`` are never shown, and retention deletes them; ending a session
deletes its own (the foreign key cascades).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Delete, delete, select
from sqlalchemy.orm import Session

from clubwire.domain import sealing
from clubwire.services import secret_keys
from clubwire.settings import Settings
from clubwire.storage import models

LIFETIME = timedelta(minutes=5)  # the redirect is followed at once: this is ample


@dataclass(frozen=True, slots=True)
class Flash:
    """``kind`` names what happened (and how a page shows it); ``words`` say it; ``subject``
    is what it is about, such as an endpoint's id, or empty; ``secret`` is to be shown once."""

    kind: str
    words: str
    subject: str = ""
    secret: str | None = None


_TAKEN = (
    models.Flash.id,
    models.Flash.created_at,
    models.Flash.kind,
    models.Flash.subject,
    models.Flash.words,
    models.Flash.secret_sealed,
)


def add(session: Session, settings: Settings, session_id: str, flash: Flash, now: datetime) -> None:
    """Leave ``flash`` for the next page of the web session ``session_id``."""
    sealed = None
    if flash.secret is not None:
        sealed = secret_keys.sealer(session, settings).seal(flash.secret)
    session.add(
        models.Flash(
            session_hash=session_id,
            created_at=now,
            kind=flash.kind,
            subject=flash.subject,
            words=flash.words,
            secret_sealed=sealed,
        )
    )


def take(session: Session, settings: Settings, session_id: str, now: datetime) -> list[Flash]:
    """The session's flashes, oldest first, deleted as they are read (stale ones too). A
    page with none to show (most pages) only reads: no write, so no wait for SQLite's one
    writer."""
    mine = models.Flash.session_hash == session_id
    if session.scalar(select(models.Flash.id).where(mine).limit(1)) is None:
        return []
    taken = session.execute(delete(models.Flash).where(mine).returning(*_TAKEN)).all()
    fresh = sorted(row for row in taken if row.created_at > now - LIFETIME)
    if not fresh:
        return []
    sealer = sealing.Sealer(settings.secret_key_value())
    return [
        Flash(row.kind, row.words, row.subject, _opened(sealer, row.secret_sealed)) for row in fresh
    ]


def stale(now: datetime, batch: int) -> Delete:
    """Deletes up to ``batch`` flashes too old to be shown (for ``services.retention``)."""
    chosen = select(models.Flash.id).where(models.Flash.created_at <= now - LIFETIME).limit(batch)
    return delete(models.Flash).where(models.Flash.id.in_(chosen.with_for_update(skip_locked=True)))


def _opened(sealer: sealing.Sealer, sealed: str | None) -> str | None:
    """The secret; none if there was none, or if the secret key changed since (``rekey``)."""
    if sealed is None:
        return None
    try:
        return sealer.open(sealed)
    except sealing.SealError:
        return None
