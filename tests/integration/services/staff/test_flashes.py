"""Flashes on both databases (ADR 0014): read once, even by two readers at the same moment."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services.staff import flashes
from clubwire.settings import Settings
from tests.factories import EPOCH, make_web_session

SAID = flashes.Flash("key-created", "API key abc created.", secret="cw_live_abc_secret")


def test_of_two_readers_at_once_only_one_gets_the_flash(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Two tabs loading at once: the second reader's delete waits for the first's to commit,
    then finds nothing (PostgreSQL's row lock; SQLite's single writer)."""
    session_id = make_web_session(sessions)
    with sessions.begin() as session:
        flashes.add(session, settings, session_id, SAID, EPOCH)

    def take() -> list[flashes.Flash]:
        with sessions.begin() as session:
            return flashes.take(session, settings, session_id, EPOCH)

    with ThreadPoolExecutor(1) as pool:
        with sessions.begin() as first:
            taken = flashes.take(first, settings, session_id, EPOCH)
            second = pool.submit(take)
        assert taken == [SAID]
        assert second.result(timeout=10) == []


def test_a_page_with_no_flash_writes_nothing(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Most pages have nothing to tell: they only read, so they never wait for (or hold)
    SQLite's one write lock, which the worker's records need too."""
    session_id = make_web_session(sessions)
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement)

    engine = sessions.kw["bind"]
    event.listen(engine, "before_cursor_execute", seen)
    try:
        with sessions.begin() as session:
            assert flashes.take(session, settings, session_id, EPOCH) == []
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert statements
    assert all(statement.lstrip().upper().startswith("SELECT") for statement in statements)
