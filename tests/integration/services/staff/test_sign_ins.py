"""Sign-in throttling (ADR 0006): guessing is slowed, and no one can lock an owner out."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import device_tokens
from clubwire.domain.device_tokens import Device
from clubwire.services import retention
from clubwire.services.staff import sign_ins, users
from clubwire.storage.models import SignInFailure, User
from tests.factories import EPOCH

PASSWORD = "correct horse battery staple"
WRONG = "not the password at all"
OWNER = "owner@granite.example"
SECRET_KEY = "a secret key for device tokens in these tests"


@pytest.fixture
def owner(session: Session) -> User:
    user = users.create_user(session, OWNER, PASSWORD, EPOCH)
    users.create_user(session, "other@granite.example", PASSWORD, EPOCH)
    return user


def _try(
    session: Session,
    password: str,
    address: str,
    now: datetime = EPOCH,
    email: str = OWNER,
    device: Device | None = None,
) -> str:
    """What a sign-in came to: ``in``, ``wrong``, or the wait it was told."""
    try:
        users.authenticate(session, email, password, now, address, device)
    except errors.Unauthenticated:
        return "wrong"
    except errors.TooManyAttempts as refused:
        return refused.detail
    return "in"


def test_failures_from_one_address_refuse_that_address_only(session: Session, owner: User) -> None:
    assert [_try(session, WRONG, "203.0.113.7") for _ in range(5)] == ["wrong"] * 5
    refused = _try(session, PASSWORD, "203.0.113.7")
    assert refused.startswith("Too many failed sign-ins: try again in")
    assert _try(session, PASSWORD, "198.51.100.1") == "in"  # the owner, from their desk
    assert _try(session, PASSWORD, "203.0.113.7", email="other@granite.example") == "in"
    later = EPOCH + sign_ins.WINDOW
    assert _try(session, PASSWORD, "203.0.113.7", later) == "in"


def test_failures_from_many_addresses_slow_the_account_by_seconds_not_minutes(
    session: Session, owner: User
) -> None:
    guesses = [_try(session, WRONG, f"203.0.113.{n}") for n in range(sign_ins.ACCOUNT_LIMIT)]
    assert guesses == ["wrong"] * sign_ins.ACCOUNT_LIMIT
    assert _try(session, WRONG, "203.0.113.99") == (
        "Too many failed sign-ins: try again in 30 seconds."
    )
    assert _try(session, PASSWORD, "198.51.100.1") == (
        "Too many failed sign-ins: try again in 30 seconds."
    )
    # One failure leaks out every 30 s: a guesser from anywhere gets two tries a minute...
    after = EPOCH + sign_ins.LEAK
    assert _try(session, WRONG, "203.0.113.100", after) == "wrong"
    assert _try(session, WRONG, "203.0.113.101", after).endswith("in 30 seconds.")
    # ...and the owner waits no longer than that, then is in, and their account forgiven.
    assert _try(session, PASSWORD, "198.51.100.1", after + sign_ins.LEAK) == "in"
    assert _try(session, WRONG, "203.0.113.102", after + sign_ins.LEAK) == "wrong"


def test_a_device_the_owner_signed_in_with_is_not_slowed(session: Session, owner: User) -> None:
    device = device_tokens.read(SECRET_KEY, device_tokens.issue(SECRET_KEY, owner.id, EPOCH), EPOCH)
    assert device is not None
    for n in range(sign_ins.ACCOUNT_LIMIT):
        _try(session, WRONG, f"203.0.113.{n}")
    for _ in range(5):
        _try(session, WRONG, "198.51.100.1")  # the owner's own address is refused too
    assert _try(session, PASSWORD, "198.51.100.1").startswith("Too many")
    stranger = Device("usr_someone_else", device.issued)  # another account's device: no help
    assert _try(session, PASSWORD, "198.51.100.1", device=stranger).startswith("Too many")
    assert _try(session, PASSWORD, "198.51.100.1", device=device) == "in"
    assert _try(session, PASSWORD, "198.51.100.1") == "in"  # and the account is forgiven


def test_a_device_that_fails_itself_is_spared_no_longer(session: Session, owner: User) -> None:
    device = Device(owner.id, int(EPOCH.timestamp()))
    tries = sign_ins.ACCOUNT_LIMIT + 1
    results = [_try(session, WRONG, f"203.0.113.{n}", device=device) for n in range(tries)]
    assert results == ["wrong"] * (tries - 1) + [
        "Too many failed sign-ins: try again in 30 seconds."
    ]
    unfailed = Device(owner.id, device.issued + 1)
    assert _try(session, PASSWORD, "203.0.113.50", device=unfailed) == "in"


def test_an_address_trying_many_accounts_is_refused(session: Session, owner: User) -> None:
    for n in range(sign_ins.ADDRESS_LIMIT):
        assert _try(session, WRONG, "203.0.113.7", email=f"user{n}@granite.example") == "wrong"
    assert _try(session, PASSWORD, "203.0.113.7").startswith("Too many")
    assert _try(session, PASSWORD, "198.51.100.1") == "in"


def test_counts_hold_no_email_or_address_and_fit_whatever_was_typed(
    session: Session, owner: User
) -> None:
    huge = "x" * 5000 + "@granite.example"
    assert _try(session, WRONG, "203.0.113.7", email=huge) == "wrong"
    session.flush()
    keys = session.scalars(select(SignInFailure.key)).all()
    assert len(keys) == 3
    assert all(len(key) < 100 and "203.0.113.7" not in key and "@" not in key for key in keys)


def test_retention_forgets_counts_with_nothing_left_in_them(
    sessions: sessionmaker[Session],
) -> None:
    with sessions.begin() as session:
        users.create_user(session, OWNER, PASSWORD, EPOCH)
    with sessions.begin() as session:
        for n in range(3):
            _try(session, WRONG, f"203.0.113.{n}")
    pruned = retention.prune(sessions, EPOCH + timedelta(minutes=14), timedelta(days=30))
    assert pruned.sign_in_failures == 0
    pruned = retention.prune(sessions, EPOCH + sign_ins.WINDOW * 2, timedelta(days=30))
    assert pruned.sign_in_failures == 7  # three pairs, three addresses, one account
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(SignInFailure)) == 0
