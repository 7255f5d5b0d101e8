"""API keys: create (the full key returned once), list, revoke, note use."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from clubwire import errors, ids
from clubwire.domain import key_format, scopes, text, timestamps
from clubwire.storage import fastpath
from clubwire.storage.models import ApiKey, Club

MAX_NAME_LENGTH = 100
LAST_USED_RESOLUTION = timedelta(minutes=1)
MAX_ADDRESS_LENGTH = 64
MAX_USER_AGENT_LENGTH = 200

NEVER = "never"
# How long a new key may live, as the CLI's --expires-in and the settings form name it.
EXPIRIES: dict[str, timedelta | None] = {
    NEVER: None,
    "30d": timedelta(days=30),
    "90d": timedelta(days=90),
    "365d": timedelta(days=365),
}


def create_key(
    session: Session,
    club: Club,
    chosen_scopes: Iterable[str],
    name: str,
    now: datetime,
    expires_in: str = NEVER,
) -> tuple[ApiKey, str]:
    """Make a key for the club; returns the record and the full key, which is not stored."""
    try:
        granted = scopes.normalise(chosen_scopes)
    except scopes.UnknownScope as exc:
        raise errors.InvalidInput(str(exc)) from None
    name = name.strip()
    if len(name) > MAX_NAME_LENGTH:
        raise errors.InvalidInput(f"A key name has at most {MAX_NAME_LENGTH} characters.")
    lifetime = expiry(expires_in)
    new = key_format.generate(ids.random_base62)
    key = ApiKey(
        id=ids.new_id("key"),
        club_id=club.id,
        prefix=new.prefix,
        secret_hash=new.secret_hash,
        name=name,
        scopes=scopes.encode(granted),
        created_at=now,
        expires_at=None if lifetime is None else now + lifetime,
    )
    session.add(key)
    session.flush()
    return key, new.value


def expiry(choice: str) -> timedelta | None:
    """How long a key made with this ``--expires-in`` choice lives (``None``: for ever)."""
    if choice not in EXPIRIES:
        raise errors.InvalidInput(f"A key expires in one of: {', '.join(EXPIRIES)}.")
    return EXPIRIES[choice]


def list_keys(session: Session, club_id: str) -> Sequence[ApiKey]:
    """The club's keys, newest first, revoked and expired ones included."""
    query = select(ApiKey).where(ApiKey.club_id == club_id)
    return session.scalars(query.order_by(ApiKey.created_at.desc(), ApiKey.id)).all()


def revoke_key(session: Session, club_id: str, prefix: str, now: datetime) -> ApiKey:
    """Revoke the club's key with this prefix: at once, for good; revoking again changes nothing."""
    key = session.scalar(select(ApiKey).where(ApiKey.club_id == club_id, ApiKey.prefix == prefix))
    if key is None:
        raise errors.NotFound(f"This club has no API key with the prefix {prefix!r}.")
    if key.revoked_at is None:
        key.revoked_at = now
        fastpath.changes_api(session)
    return key


def note_use(
    session: Session,
    key_id: str,
    now: datetime,
    address: str | None = None,
    user_agent: str | None = None,
) -> None:
    """Record that the key was used, from where and by what client (``None``: not known),
    unless a use was already recorded within the last minute."""
    session.execute(
        update(ApiKey)
        .where(
            ApiKey.id == key_id,
            or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at <= now - LAST_USED_RESOLUTION),
        )
        .values(
            last_used_at=now,
            last_used_ip=client_text(address, MAX_ADDRESS_LENGTH),
            last_used_user_agent=client_text(user_agent, MAX_USER_AGENT_LENGTH),
        )
    )


def client_text(value: str | None, limit: int) -> str | None:
    """A header a client sent, fit to keep and show: every character that is not printable
    (controls, bidirectional overrides, line breaks, tabs) removed, then cut to ``limit``
    characters (the last an ellipsis); ``None`` when nothing is left."""
    if value is None:
        return None
    kept = value if value.isprintable() else "".join(c for c in value if c.isprintable())
    return text.cleaned(kept, limit) or None


def status(key: ApiKey, now: datetime) -> str:
    """``revoked``, ``expired`` or ``active``: whether the API would accept the key ``now``."""
    if key.revoked_at is not None:
        return "revoked"
    return "expired" if key_format.expired(key.expires_at, now) else "active"


def describe(key: ApiKey, now: datetime) -> dict[str, object]:
    """The key as lists show it at ``now``: never the secret, nor its hash."""
    return {
        "id": key.id,
        "prefix": key.prefix,
        "name": key.name,
        "scopes": list(scopes.decode(key.scopes)),
        "status": status(key, now),
        "createdAt": timestamps.to_wire(key.created_at),
        "expiresAt": timestamps.to_wire_or_none(key.expires_at),
        "lastUsedAt": timestamps.to_wire_or_none(key.last_used_at),
        "lastUsedIp": key.last_used_ip,
        "lastUsedUserAgent": key.last_used_user_agent,
        "revokedAt": timestamps.to_wire_or_none(key.revoked_at),
    }
