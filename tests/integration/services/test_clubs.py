"""Clubs: create or rename, the module switch, lookups."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy.exc
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from clubwire import errors
from clubwire.services import clubs
from clubwire.storage.models import Club
from tests.factories import EPOCH


def test_put_club_creates_with_the_module_off(session: Session) -> None:
    club, created = clubs.put_club(session, "granite", "Granite Curling Club", EPOCH)
    session.commit()
    assert created
    assert club.id.startswith("org_")
    assert club.webhooks_enabled is False


def test_put_club_again_renames_and_keeps_the_id(session: Session) -> None:
    first, _ = clubs.put_club(session, "granite", "Granite", EPOCH)
    second, created = clubs.put_club(session, "granite", "Granite Curling Club", EPOCH)
    assert not created
    assert second.id == first.id
    assert second.name == "Granite Curling Club"
    assert session.scalar(select(func.count()).select_from(Club)) == 1


@pytest.mark.parametrize("slug", ["", "Granite", "-granite", "granite-", "gran_ite", "a" * 64])
def test_a_bad_slug_is_refused(session: Session, slug: str) -> None:
    with pytest.raises(errors.InvalidInput, match="slug"):
        clubs.put_club(session, slug, "Name", EPOCH)
    assert session.scalar(select(func.count()).select_from(Club)) == 0


@pytest.mark.parametrize("name", ["", "   ", "x" * 201])
def test_a_bad_name_is_refused(session: Session, name: str) -> None:
    with pytest.raises(errors.InvalidInput, match="name"):
        clubs.put_club(session, "granite", name, EPOCH)


@pytest.mark.parametrize(
    "name", ["Granite\r\nCurling", "Granite\n", "Gran\x85ite", "Granite\tCC", "\u202eetinarG"]
)
def test_a_name_with_a_control_or_direction_character_is_refused(
    session: Session, name: str
) -> None:
    """Even at its ends, which would otherwise be stripped as spaces."""
    with pytest.raises(errors.InvalidInput, match="A club name must be one line"):
        clubs.create_club(session, "granite", name, EPOCH)
    clubs.put_club(session, "granite", "Granite", EPOCH)
    with pytest.raises(errors.InvalidInput, match="A club name must be one line"):
        clubs.put_club(session, "granite", name, EPOCH)
    session.commit()
    assert session.scalars(select(Club.name)).all() == ["Granite"]


def test_create_club_refuses_a_taken_slug(session: Session) -> None:
    clubs.create_club(session, "granite", "Granite", EPOCH)
    with pytest.raises(errors.InvalidInput, match="exists already"):
        clubs.create_club(session, "granite", "Other", EPOCH)


def test_module_switch_is_idempotent(session: Session) -> None:
    clubs.put_club(session, "granite", "Granite", EPOCH)
    assert clubs.set_webhooks_module(session, "granite", True, EPOCH).webhooks_enabled
    assert clubs.set_webhooks_module(session, "granite", True, EPOCH).webhooks_enabled
    assert not clubs.set_webhooks_module(session, "granite", False, EPOCH).webhooks_enabled


def test_an_unknown_club_is_not_found(session: Session) -> None:
    with pytest.raises(errors.NotFound, match="nowhere"):
        clubs.get_club(session, "nowhere")
    with pytest.raises(errors.NotFound):
        clubs.set_webhooks_module(session, "nowhere", True, EPOCH)


def test_payload_days_are_set_and_cleared_within_the_history(session: Session) -> None:
    clubs.put_club(session, "granite", "Granite", EPOCH)
    later = EPOCH + timedelta(hours=1)
    assert clubs.set_payload_days(session, "granite", 30, 30, later).payload_days == 30
    club = clubs.set_payload_days(session, "granite", None, 30, EPOCH)
    assert (club.payload_days, club.updated_at) == (None, EPOCH)
    for days in (0, -3, 31):
        with pytest.raises(errors.InvalidInput, match=r"from 1 to 30: .* history \(30 days\)\.$"):
            clubs.set_payload_days(session, "granite", days, 30, EPOCH)
    with pytest.raises(errors.NotFound):
        clubs.set_payload_days(session, "nowhere", 7, 30, EPOCH)


def test_describe_uses_wire_names_and_timestamps(session: Session) -> None:
    club, _ = clubs.put_club(session, "granite", "Granite", EPOCH)
    record = clubs.describe(club, "http://x/clubs/granite")
    assert record == {
        "id": club.id,
        "slug": "granite",
        "name": "Granite",
        "webhooksEnabled": False,
        "payloadDays": None,
        "baseUrl": "http://x/clubs/granite",
        "createdAt": "2026-01-05T12:00:00.000Z",
        "updatedAt": "2026-01-05T12:00:00.000Z",
    }


def test_database_errors_never_list_their_parameters(session: Session) -> None:
    """Errors reach logs; their parameters may be a receiver's answer or a sealed secret.
    (PostgreSQL's own detail may still quote a failing row: a NOT NULL error does.)"""
    insert = (
        "INSERT INTO clubs (id, slug, name, created_at, updated_at)"
        " VALUES (:id, :id, NULL, :at, :at)"
    )
    with pytest.raises(sqlalchemy.exc.IntegrityError) as caught:
        session.execute(text(insert), {"id": "sealed-marker", "at": EPOCH})
    assert "[parameters:" not in str(caught.value)
    assert "[SQL parameters hidden due to hide_parameters=True]" in str(caught.value)
