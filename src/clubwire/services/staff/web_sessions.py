"""Server-side sessions for the settings area: the cookie holds a random token, the
database only its hash; signing out ends the session on the server."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from clubwire.storage.models import User, WebSession

LIFETIME = timedelta(hours=12)


@dataclass(frozen=True, slots=True)
class SignedIn:
    user: User
    csrf_token: str
    session_id: str  # the session's key: the hash of its token, never the token


def start(session: Session, user: User, now: datetime) -> str:
    """A new session (a new id at every sign-in); returns the cookie's token."""
    token = secrets.token_urlsafe(32)
    session.add(
        WebSession(
            token_hash=_hash(token),
            user_id=user.id,
            csrf_token=secrets.token_urlsafe(32),
            created_at=now,
            expires_at=now + LIFETIME,
        )
    )
    session.execute(delete(WebSession).where(WebSession.expires_at < now))
    return token


def find(session: Session, token: str, now: datetime) -> SignedIn | None:
    """Who this token belongs to, while its session lasts."""
    row = session.execute(
        select(User, WebSession.csrf_token, WebSession.token_hash)
        .join(WebSession, WebSession.user_id == User.id)
        .where(WebSession.token_hash == _hash(token), WebSession.expires_at > now)
    ).one_or_none()
    return None if row is None else SignedIn(row[0], row[1], row[2])


def end(session: Session, token: str) -> None:
    """End the session on the server; its flashes go with it (the foreign key cascades)."""
    session.execute(delete(WebSession).where(WebSession.token_hash == _hash(token)))


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
