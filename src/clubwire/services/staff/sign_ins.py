"""How failed sign-ins slow password guessing without letting anyone lock an owner out
(ADR 0006). Three counts, kept in ``sign_in_failures`` by key:

- ``pair:<email> <address>``, one account from one address: ``PAIR_LIMIT`` failures in a
  ``WINDOW`` refuse that account from that address for the rest of the window, and nothing
  else;
- ``address:<address>``, any accounts from one address: ``ADDRESS_LIMIT`` failures in a
  window refuse the address (a host trying many accounts), set high enough that an office
  behind one address does not trip it;
- ``account:<email>``, one account from anywhere, as a leaky bucket: each failure adds one,
  one leaks out every ``LEAK`` seconds, and while ``ACCOUNT_LIMIT`` are in it the next
  attempt waits until one has leaked. One address cannot fill it alone (its pair is
  refused first); guessing from many addresses gets two tries a minute; the owner waits at
  most ``LEAK``.

Keys hold a hash of the email and address, not the text. A browser the account signed in
with before (its device token, ``domain.device_tokens``)
is spared all three until it fails ``PAIR_LIMIT`` times itself (``device:<user>.<issued>``).
The address is the socket peer unless ``CLUBWIRE_TRUSTED_PROXIES`` names the proxy in front.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Delete, delete, select
from sqlalchemy.orm import Session

from clubwire import errors
from clubwire.domain.device_tokens import Device
from clubwire.storage.models import SignInFailure

WINDOW = timedelta(minutes=15)
PAIR_LIMIT = 5
ADDRESS_LIMIT = 50
ACCOUNT_LIMIT = 10  # twice PAIR_LIMIT: one address alone never slows the account
LEAK = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class Attempt:
    """Who is trying to sign in: the account's email (normalised), from which address, with
    which device token (read and checked; None without one)."""

    email: str
    address: str
    device: Device | None = None


def check(session: Session, attempt: Attempt, user_id: str | None, now: datetime) -> None:
    """Raises :class:`errors.TooManyAttempts` (saying how long to wait) if this attempt must
    wait; ``user_id`` is the account's, if it exists."""
    if _known(session, attempt, user_id, now):
        return
    for key, limit in ((_pair(attempt), PAIR_LIMIT), (_address(attempt), ADDRESS_LIMIT)):
        row = session.get(SignInFailure, key)
        if row is not None and row.failures >= limit and now - row.window_start < WINDOW:
            raise _wait(row.window_start + WINDOW - now)
    level, since = _leaked(session.get(SignInFailure, _account(attempt)), now)
    if level >= ACCOUNT_LIMIT:
        raise _wait(since + LEAK - now)


def failed(session: Session, attempt: Attempt, now: datetime) -> None:
    """Count a failed attempt against each of its keys."""
    keys = [_pair(attempt), _address(attempt)]
    if attempt.device is not None:
        keys.append(_device(attempt.device))
    for key in keys:
        _count_in_window(session, key, now)
    account = session.get(SignInFailure, _account(attempt))
    level, since = _leaked(account, now)
    if account is None:
        session.add(SignInFailure(key=_account(attempt), failures=level + 1, window_start=since))
    else:
        account.failures, account.window_start = level + 1, since


def succeeded(session: Session, attempt: Attempt) -> None:
    """The account's owner is in: what failed for it, from here or anywhere, is forgiven."""
    keys = [_pair(attempt), _account(attempt)]
    session.execute(delete(SignInFailure).where(SignInFailure.key.in_(keys)))


def stale(now: datetime, batch: int) -> Delete:
    """Deletes up to ``batch`` counts with nothing left in them at ``now`` (for the worker's
    periodic pruning, ``services.retention``)."""
    cutoff = now - max(WINDOW, LEAK * ACCOUNT_LIMIT)
    key, started = SignInFailure.key, SignInFailure.window_start
    chosen = select(key).where(started < cutoff).limit(batch).with_for_update(skip_locked=True)
    return delete(SignInFailure).where(key.in_(chosen))


def _known(session: Session, attempt: Attempt, user_id: str | None, now: datetime) -> bool:
    """Whether the attempt comes from a device of this account that has not failed much."""
    device = attempt.device
    if device is None or user_id is None or device.user_id != user_id:
        return False
    row = session.get(SignInFailure, _device(device))
    return row is None or row.failures < PAIR_LIMIT or now - row.window_start >= WINDOW


def _count_in_window(session: Session, key: str, now: datetime) -> None:
    row = session.get(SignInFailure, key)
    if row is None:
        session.add(SignInFailure(key=key, failures=1, window_start=now))
    elif now - row.window_start >= WINDOW:
        row.failures, row.window_start = 1, now
    else:
        row.failures += 1


def _leaked(row: SignInFailure | None, now: datetime) -> tuple[int, datetime]:
    """The account bucket's level at ``now``, and when its last whole leak happened (its
    ``window_start``: failures leak from there)."""
    if row is None or row.failures == 0:
        return 0, now
    leaks = min(row.failures, int((now - row.window_start) / LEAK))
    if leaks == row.failures:
        return 0, now
    return row.failures - leaks, row.window_start + leaks * LEAK


def _wait(left: timedelta) -> errors.TooManyAttempts:
    seconds = max(1, math.ceil(left.total_seconds()))
    wait = f"{seconds} seconds" if seconds < 120 else f"{math.ceil(seconds / 60)} minutes"
    return errors.TooManyAttempts(f"Too many failed sign-ins: try again in {wait}.")


def _pair(attempt: Attempt) -> str:
    return _key("pair", attempt.email, attempt.address)


def _address(attempt: Attempt) -> str:
    return _key("address", attempt.address)


def _account(attempt: Attempt) -> str:
    return _key("account", attempt.email)


def _device(device: Device) -> str:
    return _key("device", device.name)


def _key(kind: str, *parts: str) -> str:
    """A count's key: its kind and a hash of what it counts, so that the table holds no email
    or address and every key fits its column, whatever was typed."""
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{kind}:{digest}"
