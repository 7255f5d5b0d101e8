"""Confirmations on both databases: a confirmation page acts once, even when submitted
twice at the same moment."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.services.staff import confirmations
from clubwire.storage.models import Confirmation, WebSession
from tests.factories import EPOCH, make_web_session


def _spend(sessions: sessionmaker[Session], session_id: str, token: str) -> bool:
    with sessions.begin() as session:
        return confirmations.spend(session, session_id, token, EPOCH)


def test_a_token_is_spent_once_per_session(sessions: sessionmaker[Session]) -> None:
    mine = make_web_session(sessions)
    theirs = make_web_session(sessions, "secretary@granite.example")
    token = confirmations.new_token()
    assert _spend(sessions, mine, token)
    assert not _spend(sessions, mine, token)
    assert _spend(sessions, theirs, token)  # their own page's token would be another
    assert _spend(sessions, mine, confirmations.new_token())


def test_of_two_submissions_at_once_only_one_acts(sessions: sessionmaker[Session]) -> None:
    """The second spend waits for the first's transaction, then finds the token
    (PostgreSQL's unique key; SQLite's single writer)."""
    session_id = make_web_session(sessions)
    token = confirmations.new_token()
    with ThreadPoolExecutor(1) as pool:
        with sessions.begin() as first:
            acted = confirmations.spend(first, session_id, token, EPOCH)
            second = pool.submit(_spend, sessions, session_id, token)
        assert acted
        assert second.result(timeout=10) is False


def test_a_token_spent_in_a_rollback_can_be_spent_again(sessions: sessionmaker[Session]) -> None:
    """An action that fails (its transaction rolled back) leaves its page usable."""
    session_id = make_web_session(sessions)
    token = confirmations.new_token()
    with sessions() as session, session.begin():
        assert confirmations.spend(session, session_id, token, EPOCH)
        session.rollback()
    assert _spend(sessions, session_id, token)


@pytest.mark.parametrize("token", ["", "short", "x" * 23, "a" * 21 + "\x00", "ａ" * 22])
def test_a_token_it_did_not_make_is_refused(sessions: sessionmaker[Session], token: str) -> None:
    session_id = make_web_session(sessions)
    with sessions.begin() as session, pytest.raises(errors.InvalidInput) as refused:
        confirmations.spend(session, session_id, token, EPOCH)
    assert refused.value.detail == confirmations.UNREADABLE


def test_spent_tokens_go_with_their_web_session(sessions: sessionmaker[Session]) -> None:
    session_id = make_web_session(sessions)
    assert _spend(sessions, session_id, confirmations.new_token())
    with sessions.begin() as session:
        token_hash = session.scalar(select(WebSession.token_hash))
        assert token_hash == session_id
        session.delete(session.get(WebSession, token_hash))
    with sessions.begin() as session:
        assert session.scalar(select(func.count()).select_from(Confirmation)) == 0
