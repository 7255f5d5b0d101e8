"""API keys: shown once, stored only as a hash, revoked for good, last use noted sparingly."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from clubwire import errors
from clubwire.domain import key_format, scopes
from clubwire.services import keys
from clubwire.storage.models import ApiKey
from tests.factories import EPOCH, make_club, make_key


def test_create_returns_the_full_key_and_stores_only_a_hash(session: Session) -> None:
    club = make_club(session)
    record, value = keys.create_key(
        session, club, ["read:programs", "read:games"], "Website", EPOCH
    )
    session.commit()
    parsed = key_format.parse(value)
    assert parsed is not None
    assert parsed.prefix == record.prefix
    assert record.scopes == "read:programs read:games"
    stored = session.execute(text("SELECT * FROM api_keys")).one()
    assert all(parsed.secret not in str(column) for column in stored)
    assert key_format.matches(parsed.secret, record.secret_hash)


@pytest.mark.parametrize("chosen", [[], ["read:everything"], ["read:programs", "write:programs"]])
def test_create_with_bad_scopes_stores_nothing(session: Session, chosen: list[str]) -> None:
    club = make_club(session)
    with pytest.raises(errors.InvalidInput, match="scope"):
        keys.create_key(session, club, chosen, "", EPOCH)
    assert session.scalar(select(func.count()).select_from(ApiKey)) == 0


def test_create_refuses_a_long_name(session: Session) -> None:
    with pytest.raises(errors.InvalidInput, match="name"):
        keys.create_key(session, make_club(session), [scopes.READ_PROGRAMS], "n" * 101, EPOCH)


def test_list_shows_the_clubs_keys_newest_first(session: Session) -> None:
    granite = make_club(session, "granite")
    marble = make_club(session, "marble")
    first, _ = keys.create_key(session, granite, ["read:programs"], "first", EPOCH)
    second, _ = keys.create_key(
        session, granite, ["read:games"], "second", EPOCH + timedelta(minutes=1)
    )
    make_key(session, marble)
    assert [k.id for k in keys.list_keys(session, granite.id)] == [second.id, first.id]


def test_revoke_is_permanent_and_idempotent(session: Session) -> None:
    club = make_club(session)
    record, _ = make_key(session, club)
    keys.revoke_key(session, club.id, record.prefix, EPOCH)
    again = keys.revoke_key(session, club.id, record.prefix, EPOCH + timedelta(days=1))
    assert again.revoked_at == EPOCH
    assert keys.describe(again)["status"] == "revoked"


def test_revoke_cannot_reach_another_clubs_key(session: Session) -> None:
    granite = make_club(session, "granite")
    marble = make_club(session, "marble")
    record, _ = make_key(session, marble)
    with pytest.raises(errors.NotFound):
        keys.revoke_key(session, granite.id, record.prefix, EPOCH)
    assert record.revoked_at is None


def test_note_use_writes_at_most_once_a_minute(session: Session) -> None:
    record, _ = make_key(session, make_club(session))
    session.commit()
    seen = []
    for offset in (0, 30, 59, 60, 61, 150):
        keys.note_use(session, record.id, EPOCH + timedelta(seconds=offset))
        session.commit()
        session.refresh(record)
        seen.append(record.last_used_at)
    at = [EPOCH + timedelta(seconds=s) for s in (0, 0, 0, 60, 60, 150)]
    assert seen == at


def test_describe_never_shows_the_secret_or_its_hash(session: Session) -> None:
    record, value = make_key(session, make_club(session))
    described = keys.describe(record)
    assert value not in str(described)
    assert record.secret_hash not in str(described)
    assert described["lastUsedAt"] is None
