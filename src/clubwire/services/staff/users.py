"""Staff accounts: superadmins and club admins, argon2-hashed passwords, throttled sign-in."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from clubwire import errors, ids
from clubwire.domain.device_tokens import Device
from clubwire.services import clubs
from clubwire.services.staff import sign_ins
from clubwire.storage.models import Club, ClubAdmin, User

MIN_PASSWORD = 12
MAX_PASSWORD = 1024
_EMAIL = re.compile(r"[^@\s]+@[^@\s.]+(\.[^@\s.]+)+")
_hasher = PasswordHasher()
# Verified against when the account does not exist, so both cases take as long.
_DECOY = _hasher.hash("clubwire decoy password")


def create_user(
    session: Session,
    email: str,
    password: str,
    now: datetime,
    superadmin: bool = False,
    club_slugs: Iterable[str] = (),
) -> User:
    """A new staff account; a club admin of each club named (superadmins manage every club)."""
    email = _valid_email(email)
    _check_password(password)
    if session.scalar(select(User.id).where(User.email == email)) is not None:
        raise errors.InvalidInput(f"There is already an account for {email}.")
    user = User(
        id=ids.new_id("usr"),
        email=email,
        password_hash=_hasher.hash(password),
        is_superadmin=superadmin,
        created_at=now,
        updated_at=now,
    )
    session.add(user)
    session.flush()
    for slug in club_slugs:
        session.add(ClubAdmin(user_id=user.id, club_id=clubs.get_club(session, slug).id))
    session.flush()
    return user


def authenticate(
    session: Session,
    email: str,
    password: str,
    now: datetime,
    address: str,
    device: Device | None = None,
) -> User:
    """The user with this email and password, signing in from ``address`` with ``device``
    (a browser they signed in with before, if any); throttled by ``services.staff.sign_ins``."""
    attempt = sign_ins.Attempt(email.strip().lower(), address, device)
    user = session.scalar(select(User).where(User.email == attempt.email))
    sign_ins.check(session, attempt, user.id if user else None, now)
    verified = _verify(user.password_hash if user else _DECOY, password)
    if user is None or not verified:
        sign_ins.failed(session, attempt, now)
        raise errors.Unauthenticated("The email or the password is not right.")
    sign_ins.succeeded(session, attempt)
    return user


def managed_clubs(session: Session, user: User) -> Sequence[Club]:
    """The clubs this user may manage: every club for a superadmin."""
    query = select(Club).order_by(Club.name, Club.slug)
    if not user.is_superadmin:
        query = query.join(ClubAdmin, ClubAdmin.club_id == Club.id).where(
            ClubAdmin.user_id == user.id
        )
    return session.scalars(query).all()


def managed_club(session: Session, user: User, slug: str) -> Club:
    """The club by slug if this user may manage it; otherwise not found (ids do not leak)."""
    for club in managed_clubs(session, user):
        if club.slug == slug:
            return club
    raise errors.NotFound(f"There is no club {slug!r}.")


def _verify(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _valid_email(email: str) -> str:
    email = email.strip().lower()
    if len(email) > 254 or not _EMAIL.fullmatch(email):
        raise errors.InvalidInput(f"{email!r} is not an email address.")
    return email


def _check_password(password: str) -> None:
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise errors.InvalidInput(f"A password has at least {MIN_PASSWORD} characters.")
