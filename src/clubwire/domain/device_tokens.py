"""Device tokens: the cookie a browser gets when a staff member signs in with it, so that a
later sign-in from that browser is known to come from its owner's device (ADR 0006).

A token is ``<user id>.<issued, unix seconds>.<tag>``, the tag an HMAC-SHA256 (base64url) of
the two, keyed with a key derived from the secret key. It names no secret and grants nothing
by itself: it only spares its holder the slowing that failures from elsewhere put on the
account. Tokens last ``LIFETIME``; any tampering, another key or another shape is no token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

LIFETIME = timedelta(days=90)
MAX_LENGTH = 200
_CONTEXT = b"clubwire device token\x00"


@dataclass(frozen=True, slots=True)
class Device:
    """A browser a user signed in with: who, and when it was first told so."""

    user_id: str
    issued: int  # unix seconds

    @property
    def name(self) -> str:
        """What its failed sign-ins are counted under."""
        return f"{self.user_id}.{self.issued}"


def issue(secret_key: str, user_id: str, now: datetime) -> str:
    """A new token for ``user_id``'s browser, issued ``now``."""
    device = Device(user_id, int(now.timestamp()))
    return f"{device.name}.{_tag(secret_key, device.name)}"


def read(secret_key: str, token: str | None, now: datetime) -> Device | None:
    """The device a token names, if it was issued under this key within ``LIFETIME``."""
    if not token or len(token) > MAX_LENGTH or not token.isascii():
        return None
    name, _, tag = token.rpartition(".")
    user_id, _, issued = name.rpartition(".")
    if not user_id or not issued.isdigit() or not hmac.compare_digest(tag, _tag(secret_key, name)):
        return None
    device = Device(user_id, int(issued))
    age = now - datetime.fromtimestamp(device.issued, UTC)
    return device if timedelta(0) <= age <= LIFETIME else None


def _tag(secret_key: str, name: str) -> str:
    key = hashlib.sha256(_CONTEXT + secret_key.encode()).digest()
    digest = hmac.new(key, name.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
