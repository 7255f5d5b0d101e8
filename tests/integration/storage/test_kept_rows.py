"""On PostgreSQL the API keeps the key rows it read in memory while it hears the database's
notices of changes to them (ADR 0010), and reads per request while it cannot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs
from clubwire.services.club_api import keys
from clubwire.settings import Settings
from clubwire.storage import fastpath
from clubwire.storage.models import ApiKey
from tests.factories import EPOCH, make_club, make_endpoint, make_key

WAIT = 5.0  # seconds at most for a notice or a lost connection to be seen


@pytest.fixture
def key(settings: Settings, sessions: sessionmaker[Session]) -> str:
    if settings.is_sqlite:
        pytest.skip("PostgreSQL's notices (SQLite's data_version: below)")
    with sessions.begin() as session:
        record, _ = make_key(session, make_club(session, "granite"))
        return record.prefix


def _change_unheard(sessions: sessionmaker[Session], prefix: str, scopes: str) -> None:
    """Change the key's scopes with its trigger switched off (no notice is sent, the change
    counter does not move): only a read sees it."""
    with sessions.begin() as session:
        session.execute(text("ALTER TABLE api_keys DISABLE TRIGGER api_keys_api_changed"))
        session.execute(update(ApiKey).where(ApiKey.prefix == prefix).values(scopes=scopes))
        session.execute(text("ALTER TABLE api_keys ENABLE TRIGGER api_keys_api_changed"))


def _revoke(sessions: sessionmaker[Session], prefix: str) -> None:
    with sessions.begin() as session:
        session.execute(update(ApiKey).where(ApiKey.prefix == prefix).values(revoked_at=EPOCH))


async def _until(check: Callable[[], Awaitable[bool]]) -> float:
    """Seconds until ``check`` holds (polled), or fail after ``WAIT``."""
    start = time.monotonic()
    while not await check():
        assert time.monotonic() - start < WAIT, "not seen in time"
        await asyncio.sleep(0.005)
    return time.monotonic() - start


async def _until_row(
    reader: fastpath.KeptRows, prefix: str, holds: Callable[[fastpath.KeyRow], bool]
) -> float:
    """Seconds until the key's row, as the reader gives it, ``holds``."""

    async def check() -> bool:
        row = await reader.key_row("granite", prefix)
        return row is not None and holds(row)

    return await _until(check)


async def _open(settings: Settings, sessions: sessionmaker[Session]) -> fastpath.KeptRows:
    reader = await fastpath.open_reader(settings.sqlalchemy_url, sessions, settings.api_kept_keys)
    assert isinstance(reader, fastpath.KeptRows)
    return reader


async def _listening(reader: fastpath.KeptRows, prefix: str) -> None:
    """Until the reader keeps rows: a read twice in a row is then served from memory."""
    await _until(lambda: _kept(reader, prefix))


async def _kept(reader: fastpath.KeptRows, prefix: str) -> bool:
    await reader.key_row("granite", prefix)
    return reader.kept(("granite", prefix))


def test_rows_are_kept_until_a_change_is_told_of(
    settings: Settings,
    sessions: sessionmaker[Session],
    key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A notice on the channel (sent after another process's commit) makes the reader
    forget, the change counter unmoved."""
    monkeypatch.setattr(fastpath, "CHECK_EVERY", 3600.0)  # the notice alone

    async def run() -> None:
        reader = await _open(settings, sessions)
        try:
            await _listening(reader, key)
            _change_unheard(sessions, key, "read:games")
            row = await reader.key_row("granite", key)
            assert row is not None
            assert row.scopes == "read:programs"  # from memory: no read saw the change
            with sessions.begin() as session:
                session.execute(text(f"NOTIFY {fastpath.CHANNEL}"))
            await _until_row(reader, key, lambda row: row.scopes == "read:games")
        finally:
            await reader.close()

    asyncio.run(run())


def test_a_change_no_notice_told_of_is_seen_by_the_change_counter(
    settings: Settings, sessions: sessionmaker[Session], key: str
) -> None:
    """A revocation made outside clubwire's services (an operator's psql; or by a process
    that died before its notice went out) moves ``api_changes`` only: the reader reads it
    every ``CHECK_EVERY`` seconds (the bound, ADR 0010) and then forgets."""

    async def run() -> float:
        reader = await _open(settings, sessions)
        try:
            await _listening(reader, key)
            _revoke(sessions, key)
            return await _until_row(reader, key, lambda row: row.revoked)
        finally:
            await reader.close()

    assert asyncio.run(run()) < WAIT


def test_a_change_this_process_commits_is_seen_before_its_notice(
    settings: Settings, sessions: sessionmaker[Session], key: str
) -> None:
    """A service's change to what authorises a request (here a revocation) makes the reader
    forget as its transaction ends: this process's next request reads, notice or not."""

    async def run() -> None:
        reader = await _open(settings, sessions)
        try:
            await _listening(reader, key)
            with sessions.begin() as session:
                keys.revoke_key(session, clubs.get_club(session, "granite").id, key, EPOCH)
            assert not reader.kept(("granite", key))  # no await since: no notice was heard
            row = await reader.key_row("granite", key)
            assert row is not None
            assert row.revoked
        finally:
            await reader.close()

    asyncio.run(run())


def test_without_its_listening_connection_every_request_reads(
    settings: Settings, sessions: sessionmaker[Session], key: str
) -> None:
    async def run() -> None:
        reader = await _open(settings, sessions)
        try:
            await _listening(reader, key)
            with sessions.begin() as session:
                terminated = session.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name = :name AND datname = current_database()"
                    ),
                    {"name": fastpath.LISTENER},
                ).all()
            assert terminated == [(True,)]
            await _until(lambda: _reads(reader, key))
            _change_unheard(sessions, key, "read:games")
            row = await reader.key_row("granite", key)
            assert row is not None
            assert row.scopes == "read:games"  # read: nothing stale is served meanwhile
            await _listening(reader, key)  # and it listens again
        finally:
            await reader.close()

    asyncio.run(run())


async def _reads(reader: fastpath.KeptRows, prefix: str) -> bool:
    await reader.key_row("granite", prefix)
    return not reader.kept(("granite", prefix))


def test_on_sqlite_rows_are_read_again_only_after_a_commit_that_changes_them(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    """The version is looked at once per turn of the event loop, shared by the requests
    that turn serves; a request that arrives after a commit sees it. A commit of what
    authorises nothing (the key's last use) costs a read of the change counter, not the
    rows."""
    if not settings.is_sqlite:
        pytest.skip("SQLite's data_version")
    with sessions.begin() as session:
        prefix = make_key(session, make_club(session, "granite"))[0].prefix

    async def run() -> list[str]:
        reader = await fastpath.open_reader(
            settings.sqlalchemy_url, sessions, settings.api_kept_keys
        )
        assert isinstance(reader, fastpath.SqliteReader)
        statements: list[str] = []
        reader._connection.set_trace_callback(statements.append)  # what it asks SQLite
        try:
            for _ in range(2):  # two turns of the event loop, three requests in each
                await asyncio.gather(*(reader.key_row("granite", prefix) for _ in range(3)))
            _note_use(sessions, prefix)
            await reader.key_row("granite", prefix)
            await asyncio.sleep(0)  # the next turn
            _revoke(sessions, prefix)
            row = await reader.key_row("granite", prefix)  # a request after the commit
            assert row is not None
            assert row.revoked
        finally:
            await reader.close()
        return ["key" if "api_keys" in s else s for s in statements]

    data_version, changes = "PRAGMA data_version", fastpath.CHANGES_QUERY
    assert asyncio.run(run()) == [
        *(data_version, changes, "key", data_version),  # two turns
        *(data_version, changes),  # the key's use: the rows stay
        *(data_version, changes, "key"),  # the revocation: read again
    ]


def _note_use(sessions: sessionmaker[Session], prefix: str) -> None:
    with sessions.begin() as session:
        key_id = session.scalars(select(ApiKey.id).where(ApiKey.prefix == prefix)).one()
        keys.note_use(session, key_id, EPOCH, "192.0.2.1", "test")


def test_at_most_the_kept_number_of_rows_are_kept_the_most_recently_used(
    settings: Settings, sessions: sessionmaker[Session], key: str
) -> None:
    """Memory stays bounded at any number of keys and clubs: past the bound the least
    recently used row is forgotten (and read again when it comes back)."""
    with sessions.begin() as session:
        club = clubs.get_club(session, "granite")
        second, third = (make_key(session, club)[0].prefix for _ in range(2))
    two = settings.model_copy(update={"api_kept_keys": 2})

    async def run() -> list[bool]:
        reader = await _open(two, sessions)
        try:
            await _listening(reader, key)
            await reader.key_row("granite", second)
            await reader.key_row("granite", key)  # key is now the most recent of the two
            await reader.key_row("granite", third)
            return [reader.kept(("granite", prefix)) for prefix in (key, second, third)]
        finally:
            await reader.close()

    assert asyncio.run(run()) == [True, False, True]


def test_what_authorises_nothing_moves_no_change_counter(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    """A key's last use (written once a minute per key in use) and an endpoint's last answer
    leave ``api_changes`` as it was (migration 0022's triggers watch chosen columns only);
    a revocation moves it."""
    with sessions.begin() as session:
        club = make_club(session, "granite")
        key, _ = make_key(session, club)
        make_endpoint(session, club, settings)

    def version() -> int:
        with sessions() as session:
            return int(session.execute(text(fastpath.CHANGES_QUERY)).scalar_one())

    before = version()
    _note_use(sessions, key.prefix)
    with sessions.begin() as session:
        session.execute(text("UPDATE endpoints SET last_response_code = 200, dead_in_a_row = 0"))
    assert version() == before
    _revoke(sessions, key.prefix)
    assert version() > before
