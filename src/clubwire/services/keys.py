"""API keys: create (the full key returned once), list, revoke, note use."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from clubwire import errors, ids
from clubwire.domain import key_format, scopes, timestamps
from clubwire.storage.models import ApiKey, Club

MAX_NAME_LENGTH = 100
LAST_USED_RESOLUTION = timedelta(minutes=1)


def create_key(
    session: Session, club: Club, chosen_scopes: Iterable[str], name: str, now: datetime
) -> tuple[ApiKey, str]:
    """Make a key for the club; returns the record and the full key, which is not stored."""
    try:
        granted = scopes.normalise(chosen_scopes)
    except scopes.UnknownScope as exc:
        raise errors.InvalidInput(str(exc)) from None
    name = name.strip()
    if len(name) > MAX_NAME_LENGTH:
        raise errors.InvalidInput(f"A key name has at most {MAX_NAME_LENGTH} characters.")
    new = key_format.generate(ids.random_base62)
    key = ApiKey(
        id=ids.new_id("key"),
        club_id=club.id,
        prefix=new.prefix,
        secret_hash=new.secret_hash,
        name=name,
        scopes=scopes.encode(granted),
        created_at=now,
    )
    session.add(key)
    session.flush()
    return key, new.value


def list_keys(session: Session, club_id: str) -> Sequence[ApiKey]:
    """The club's keys, newest first, revoked ones included."""
    query = select(ApiKey).where(ApiKey.club_id == club_id)
    return session.scalars(query.order_by(ApiKey.created_at.desc(), ApiKey.id)).all()


def revoke_key(session: Session, club_id: str, prefix: str, now: datetime) -> ApiKey:
    """Revoke the club's key with this prefix: at once, for good; revoking again changes nothing."""
    key = session.scalar(select(ApiKey).where(ApiKey.club_id == club_id, ApiKey.prefix == prefix))
    if key is None:
        raise errors.NotFound(f"This club has no API key with the prefix {prefix!r}.")
    if key.revoked_at is None:
        key.revoked_at = now
    return key


def note_use(session: Session, key_id: str, now: datetime) -> None:
    """Record that the key was used, unless that was already recorded within the last minute."""
    session.execute(
        update(ApiKey)
        .where(
            ApiKey.id == key_id,
            or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at <= now - LAST_USED_RESOLUTION),
        )
        .values(last_used_at=now)
    )


def describe(key: ApiKey) -> dict[str, object]:
    """The key as lists show it: never the secret, nor its hash."""
    return {
        "id": key.id,
        "prefix": key.prefix,
        "name": key.name,
        "scopes": list(scopes.decode(key.scopes)),
        "status": "active" if key.revoked_at is None else "revoked",
        "createdAt": timestamps.to_wire(key.created_at),
        "lastUsedAt": timestamps.to_wire_or_none(key.last_used_at),
        "revokedAt": timestamps.to_wire_or_none(key.revoked_at),
    }
