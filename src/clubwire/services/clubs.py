"""Clubs: create or rename, switch the ``webhooks`` module, how long payloads are kept,
look up."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from clubwire import errors, ids
from clubwire.domain import slugs, text, timestamps
from clubwire.services import endpoints
from clubwire.storage import fastpath
from clubwire.storage.models import Club, Delivery

MAX_NAME_LENGTH = 200


def put_club(session: Session, slug: str, name: str, now: datetime) -> tuple[Club, bool]:
    """Create the club, or rename it; returns the club and whether it was created."""
    _check_slug(slug)
    name = _checked_name(name)
    club = session.scalar(select(Club).where(Club.slug == slug))
    if club is None:
        club = Club(id=ids.new_id("org"), slug=slug, name=name, created_at=now, updated_at=now)
        club.webhooks_enabled = False
        club.programs_version = 0
        session.add(club)
        session.flush()
        return club, True
    if club.name != name:
        club.name = name
        club.updated_at = now
    return club, False


def create_club(session: Session, slug: str, name: str, now: datetime) -> Club:
    """Create a new club; a slug already taken is an error (use ``put_club`` to upsert)."""
    _check_slug(slug)
    if session.scalar(select(Club.id).where(Club.slug == slug)) is not None:
        raise errors.InvalidInput(f"A club with the slug {slug!r} exists already.")
    club, _ = put_club(session, slug, name, now)
    return club


def get_club(session: Session, slug: str) -> Club:
    club = session.scalar(select(Club).where(Club.slug == slug))
    if club is None:
        raise errors.NotFound(f"There is no club {slug!r}.")
    return club


def get_club_by_id(session: Session, club_id: str) -> Club:
    club = session.get(Club, club_id)
    if club is None:
        raise errors.NotFound(f"There is no club {club_id!r}.")
    return club


def list_clubs(session: Session) -> Sequence[Club]:
    return session.scalars(select(Club).order_by(Club.slug)).all()


def set_webhooks_module(session: Session, slug: str, enabled: bool, now: datetime) -> Club:
    """Switch the club's Webhooks & API module on or off (idempotent).

    Switching it off keeps the club's waiting deliveries as skipped.
    """
    club = get_club(session, slug)
    if club.webhooks_enabled != enabled:
        club.webhooks_enabled = enabled
        club.updated_at = now
        fastpath.changes_api(session)
        if not enabled:
            endpoints.skip_waiting(session, Delivery.club_id == club.id, now)
    return club


def set_payload_days(
    session: Session, slug: str, days: int | None, retention_days: int, now: datetime
) -> Club:
    """Keep the club's event payloads for ``days`` (1 to ``retention_days``, the history's
    length), or as long as the history (None); ``services.personal_data.expiry`` empties
    them afterwards."""
    if days is not None and not 1 <= days <= retention_days:
        raise errors.InvalidInput(payload_days_rule(retention_days))
    club = get_club(session, slug)
    if club.payload_days != days:
        club.payload_days = days
        club.updated_at = now
    return club


def payload_days_rule(retention_days: int) -> str:
    """What a club's payload days may be, in a sentence (what refuses any other)."""
    return (
        f"Payload days must be a whole number from 1 to {retention_days}: payloads are never "
        f"kept longer than the history ({retention_days} days)."
    )


def payloads_kept(days: int | None, retention_days: int) -> str:
    """How long a club's payloads are kept, in words: ``for 7 days``."""
    if days is None:
        return f"as long as the history ({retention_days} days)"
    return f"for {days} day" if days == 1 else f"for {days} days"


def _checked_name(name: str) -> str:
    """The name without the spaces around it; InvalidInput if it is not one line of 1 to
    ``MAX_NAME_LENGTH`` characters (``text.name_refusal``, the rule of every name)."""
    why = text.name_refusal(name)
    if why is not None:
        raise errors.InvalidInput(f"A club name {why}.")
    name = name.strip()
    if not name or len(name) > MAX_NAME_LENGTH:
        raise errors.InvalidInput(f"A club name has 1–{MAX_NAME_LENGTH} characters.")
    return name


def _check_slug(slug: str) -> None:
    if not slugs.is_slug(slug):
        raise errors.InvalidInput(f"{slug!r} is not a valid club slug: use {slugs.SLUG_RULE}.")


def describe(club: Club, base_url: str) -> dict[str, object]:
    """The club as the internal API and ``--json`` show it."""
    return {
        "id": club.id,
        "slug": club.slug,
        "name": club.name,
        "webhooksEnabled": club.webhooks_enabled,
        "payloadDays": club.payload_days,
        "baseUrl": base_url,
        "createdAt": timestamps.to_wire(club.created_at),
        "updatedAt": timestamps.to_wire(club.updated_at),
    }
