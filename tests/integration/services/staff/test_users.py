"""Staff accounts: argon2 passwords, who manages which club, sessions (throttling:
test_sign_ins.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from clubwire import errors
from clubwire.services.staff import users, web_sessions
from tests.factories import EPOCH, make_club

PASSWORD = "correct horse battery staple"


def test_passwords_are_stored_as_argon2_hashes(session: Session) -> None:
    user = users.create_user(session, " Skip@Granite.example ", PASSWORD, EPOCH)
    session.commit()
    assert user.email == "skip@granite.example"
    assert user.password_hash.startswith("$argon2id$")
    stored = session.execute(text("SELECT * FROM users")).one()
    assert all(PASSWORD not in str(column) for column in stored)


@pytest.mark.parametrize(
    ("email", "password", "message"),
    [("not-an-email", PASSWORD, "email"), ("a@b.example", "short", "12 characters")],
)
def test_bad_accounts_are_refused(
    session: Session, email: str, password: str, message: str
) -> None:
    with pytest.raises(errors.InvalidInput, match=message):
        users.create_user(session, email, password, EPOCH)


def test_an_email_has_one_account(session: Session) -> None:
    users.create_user(session, "a@b.example", PASSWORD, EPOCH)
    with pytest.raises(errors.InvalidInput, match="already"):
        users.create_user(session, "A@B.example", PASSWORD, EPOCH)


def test_sign_in_checks_the_password(session: Session) -> None:
    created = users.create_user(session, "a@b.example", PASSWORD, EPOCH)
    assert users.authenticate(session, "A@b.example", PASSWORD, EPOCH, "10.0.0.1").id == created.id
    for email, password in (("a@b.example", "wrong password!"), ("nobody@b.example", PASSWORD)):
        with pytest.raises(errors.Unauthenticated, match="not right"):
            users.authenticate(session, email, password, EPOCH, "10.0.0.1")


def test_club_admins_manage_only_their_clubs(session: Session) -> None:
    make_club(session, "granite")
    make_club(session, "marble")
    admin = users.create_user(session, "a@b.example", PASSWORD, EPOCH, club_slugs=["granite"])
    boss = users.create_user(session, "boss@b.example", PASSWORD, EPOCH, superadmin=True)
    assert [c.slug for c in users.managed_clubs(session, admin)] == ["granite"]
    assert [c.slug for c in users.managed_clubs(session, boss)] == ["granite", "marble"]
    assert users.managed_club(session, admin, "granite").slug == "granite"
    with pytest.raises(errors.NotFound):
        users.managed_club(session, admin, "marble")


def test_sessions_start_find_and_end(session: Session) -> None:
    user = users.create_user(session, "a@b.example", PASSWORD, EPOCH)
    token = web_sessions.start(session, user, EPOCH)
    found = web_sessions.find(session, token, EPOCH + timedelta(hours=1))
    assert found is not None
    assert found.user.id == user.id
    assert len(found.csrf_token) >= 32
    assert token not in str(session.execute(text("SELECT * FROM web_sessions")).all())
    assert web_sessions.find(session, token, EPOCH + timedelta(hours=13)) is None
    assert web_sessions.start(session, user, EPOCH) != token  # a new id at every sign-in
    web_sessions.end(session, token)
    assert web_sessions.find(session, token, EPOCH) is None
