"""API keys: shown once, stored only as a hash, revoked for good or expired, last use (when,
from where, by what) noted sparingly; the API's check of them (``ApiAccess``), keys made
before checksums included."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import key_format, scopes
from clubwire.services.club_api import keys
from clubwire.services.club_api.api_access import ApiAccess, ApiClient, Caller
from clubwire.settings import Settings
from clubwire.storage import fastpath
from clubwire.storage.models import ApiKey
from tests.factories import EPOCH, FakeClock, make_club, make_key

Authorize = Callable[..., Caller]


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
    assert keys.describe(again, EPOCH)["status"] == "revoked"


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
    described = keys.describe(record, EPOCH)
    assert value not in str(described)
    assert record.secret_hash not in str(described)
    assert described["lastUsedAt"] is None


def test_a_key_never_expires_unless_asked(session: Session) -> None:
    record, _ = make_key(session, make_club(session))
    assert record.expires_at is None
    described = keys.describe(record, EPOCH + timedelta(days=10_000))
    assert described["expiresAt"] is None
    assert described["status"] == "active"


@pytest.mark.parametrize(("choice", "days"), [("30d", 30), ("90d", 90), ("365d", 365)])
def test_a_key_made_to_expire_is_expired_from_that_moment_on(
    session: Session, choice: str, days: int
) -> None:
    record, _ = keys.create_key(
        session, make_club(session), [scopes.READ_PROGRAMS], "", EPOCH, choice
    )
    session.commit()
    session.expire_all()
    (stored,) = keys.list_keys(session, record.club_id)
    assert stored.expires_at == EPOCH + timedelta(days=days)
    just_before = keys.describe(stored, stored.expires_at - timedelta(milliseconds=1))
    assert just_before["status"] == "active"
    at = keys.describe(stored, stored.expires_at)
    assert at["status"] == "expired"
    assert at["expiresAt"] == (EPOCH + timedelta(days=days)).isoformat()[:19] + ".000Z"


@pytest.mark.parametrize("choice", ["", "7d", "30", "30D", "forever", " never"])
def test_an_unknown_expiry_stores_nothing(session: Session, choice: str) -> None:
    club = make_club(session)
    with pytest.raises(errors.InvalidInput, match="never, 30d, 90d, 365d"):
        keys.create_key(session, club, [scopes.READ_PROGRAMS], "", EPOCH, choice)
    assert session.scalar(select(func.count()).select_from(ApiKey)) == 0


def test_revoked_wins_over_expired(session: Session) -> None:
    club = make_club(session)
    record, _ = keys.create_key(session, club, [scopes.READ_PROGRAMS], "", EPOCH, "30d")
    keys.revoke_key(session, club.id, record.prefix, EPOCH)
    assert keys.status(record, EPOCH + timedelta(days=31)) == "revoked"


def test_note_use_keeps_the_address_and_user_agent_of_the_use_it_records(
    session: Session,
) -> None:
    record, _ = make_key(session, make_club(session))
    session.commit()
    uses = [
        (0, "203.0.113.7", "club-site/1.0"),
        (30, "198.51.100.1", "other/2.0"),  # within the minute: not recorded
        (60, "2001:db8::1", "Mozilla/5.0\x1b[2J\u202e " + "x" * 300),
        (200, None, None),
    ]
    seen = []
    for offset, address, agent in uses:
        keys.note_use(session, record.id, EPOCH + timedelta(seconds=offset), address, agent)
        session.commit()
        session.refresh(record)
        described = keys.describe(record, EPOCH)
        seen.append(
            (described["lastUsedAt"], described["lastUsedIp"], described["lastUsedUserAgent"])
        )
    long_agent = ("Mozilla/5.0[2J " + "x" * 300)[:199] + "…"
    assert seen == [
        ("2026-01-05T12:00:00.000Z", "203.0.113.7", "club-site/1.0"),
        ("2026-01-05T12:00:00.000Z", "203.0.113.7", "club-site/1.0"),
        ("2026-01-05T12:01:00.000Z", "2001:db8::1", long_agent),
        ("2026-01-05T12:03:20.000Z", None, None),
    ]
    assert len(long_agent) == keys.MAX_USER_AGENT_LENGTH


# -- the API's check: ApiAccess on the real reader of each database ---------------------------


class CountingReader:
    """The real reader, counting its reads: what is refused offline never reaches it."""

    def __init__(self, reader: fastpath.Reader) -> None:
        self.reader = reader
        self.reads = 0

    async def key_row(self, slug: str, prefix: str) -> fastpath.KeyRow | None:
        self.reads += 1
        return await self.reader.key_row(slug, prefix)

    async def close(self) -> None:
        await self.reader.close()


@pytest.fixture
def reader(
    settings: Settings, sessions: sessionmaker[Session]
) -> Iterator[tuple[asyncio.Runner, CountingReader]]:
    with asyncio.Runner() as runner:
        opened = runner.run(
            fastpath.open_reader(settings.sqlalchemy_url, sessions, settings.api_kept_keys)
        )
        counting = CountingReader(opened)
        yield runner, counting
        runner.run(counting.close())


@pytest.fixture
def authorize(
    reader: tuple[asyncio.Runner, CountingReader],
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: FakeClock,
) -> Authorize:
    """``ApiAccess.authorize`` at granite for ``read:programs``, as the API calls it."""
    runner, counting = reader
    access = ApiAccess(
        counting, sessions, clock, settings.api_kept_listings, settings.api_kept_keys
    )

    def call(value: str, client: ApiClient | None = None, slug: str = "granite") -> Caller:
        bearer = f"Bearer {value}"
        return runner.run(access.authorize(slug, bearer, scopes.READ_PROGRAMS, client=client))

    return call


def _refusal(authorize: Authorize, value: str) -> str:
    with pytest.raises(errors.Unauthenticated) as raised:
        authorize(value)
    return raised.value.detail


def _legacy_key(sessions: sessionmaker[Session]) -> tuple[ApiKey, str]:
    """A key as made before checksums: its secret is 32 characters, no checksum."""
    secret = "V3rYl0ngS3cr3tV4lu3sT4y0nTh3S3rv"
    record, _ = _new_key(sessions)
    with sessions.begin() as session:
        stored = update(ApiKey).where(ApiKey.id == record.id)
        session.execute(stored.values(secret_hash=key_format.hash_secret(secret)))
    return record, f"cw_live_{record.prefix}_{secret}"


def _new_key(sessions: sessionmaker[Session], expires_in: str = keys.NEVER) -> tuple[ApiKey, str]:
    """A key of granite's (made on first use, module on), made at EPOCH."""
    with sessions.begin() as session:
        club = make_club(session)
        return keys.create_key(session, club, [scopes.READ_PROGRAMS], "", EPOCH, expires_in)


def _tampered(value: str) -> str:
    """The key with its last character changed: the checksum no longer holds."""
    return value[:-1] + ("A" if value[-1] != "A" else "B")


def test_a_new_key_and_a_key_made_before_checksums_both_work(
    authorize: Authorize, sessions: sessionmaker[Session]
) -> None:
    new, value = _new_key(sessions)
    legacy, legacy_value = _legacy_key(sessions)
    assert len(value.rsplit("_", 1)[1]) == key_format.SECRET_LENGTH
    assert len(legacy_value.rsplit("_", 1)[1]) == key_format.LEGACY_SECRET_LENGTH
    assert authorize(value).key_id == new.id
    assert authorize(legacy_value).key_id == legacy.id


def test_a_key_whose_checksum_fails_is_refused_without_a_database_read(
    authorize: Authorize,
    sessions: sessionmaker[Session],
    reader: tuple[asyncio.Runner, CountingReader],
) -> None:
    _, value = _new_key(sessions)
    prefix = value.split("_")[2]
    mistyped_prefix = value.replace(prefix, prefix[::-1] if prefix[::-1] != prefix else "A" * 10)
    cut_and_padded = value[:-3] + "000"
    for presented in (_tampered(value), mistyped_prefix, cut_and_padded):
        detail = _refusal(authorize, presented)
        assert detail == (
            "This is not a valid clubwire API key: its checksum does not match "
            "(is it mistyped or cut short?)."
        )
        assert value not in detail
    assert reader[1].reads == 0
    assert authorize(value).prefix == prefix
    assert reader[1].reads == 1


def test_a_legacy_shaped_key_is_read_and_unknown_when_it_is_not_one(
    authorize: Authorize, sessions: sessionmaker[Session]
) -> None:
    _, legacy_value = _legacy_key(sessions)
    assert _refusal(authorize, _tampered(legacy_value)) == "This API key is not known at this club."
    _, value = _new_key(sessions)
    without_checksum = value[: -key_format.CHECKSUM_LENGTH]
    assert _refusal(authorize, without_checksum) == "This API key is not known at this club."


@pytest.mark.parametrize("choice", ["30d", "90d", "365d"])
def test_an_expired_key_is_refused_saying_when_it_expired(
    authorize: Authorize, sessions: sessionmaker[Session], clock: FakeClock, choice: str
) -> None:
    record, value = _new_key(sessions, choice)
    assert record.expires_at is not None
    clock.now = record.expires_at - timedelta(seconds=1)
    assert authorize(value).key_id == record.id
    clock.now = record.expires_at
    expired_at = keys.describe(record, clock.now)["expiresAt"]
    assert _refusal(authorize, value) == f"This API key expired at {expired_at}."
    assert str(expired_at).endswith(".000Z")


def test_an_expired_revoked_key_is_refused_as_revoked(
    authorize: Authorize, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    record, value = _new_key(sessions, "30d")
    with sessions.begin() as session:
        keys.revoke_key(session, record.club_id, record.prefix, EPOCH)
    clock.advance(days=31)
    assert _refusal(authorize, value) == "This API key has been revoked."


def _last_use(sessions: sessionmaker[Session], key_id: str) -> tuple[object, ...]:
    with sessions() as session:
        record = session.get_one(ApiKey, key_id)
        return record.last_used_at, record.last_used_ip, record.last_used_user_agent


def test_each_use_records_its_address_and_user_agent_at_most_once_a_minute(
    authorize: Authorize, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    record, value = _new_key(sessions)
    first = ApiClient(address="203.0.113.7", user_agent="club-site/1.0 (+https://granite.example)")
    authorize(value, first)
    assert _last_use(sessions, record.id) == (EPOCH, first.address, first.user_agent)
    clock.advance(seconds=59)
    authorize(value, ApiClient(address="198.51.100.1", user_agent="other/2.0"))
    assert _last_use(sessions, record.id) == (EPOCH, first.address, first.user_agent)
    clock.advance(seconds=1)
    authorize(value, ApiClient(address="2001:db8::1", user_agent="bad\x00\x1b[31m\u202eagent"))
    assert _last_use(sessions, record.id) == (clock.now, "2001:db8::1", "bad[31magent")
    clock.advance(minutes=1)
    authorize(value)
    assert _last_use(sessions, record.id) == (clock.now, None, None)


def test_a_refused_request_records_no_use(
    authorize: Authorize, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    record, value = _new_key(sessions, "30d")
    clock.advance(days=30)
    _refusal(authorize, value)
    _refusal(authorize, _tampered(value))
    assert _last_use(sessions, record.id) == (None, None, None)
