"""The API key format ``cw_live_<prefix>_<secret>`` (DESIGN §4), as pure functions.

The prefix is public (shown in lists, logged, used to look the key up); only a SHA-256
of the secret part is ever stored. The secret carries about 190 bits, so a plain hash
is as strong as a slow one here and costs a microsecond on the request path.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass

TAG = "cw_live_"
PREFIX_LENGTH = 10
SECRET_LENGTH = 32
MAX_KEY_LENGTH = 128

_SHAPE = re.compile(r"cw_live_([0-9A-Za-z]{8,12})_([0-9A-Za-z]{32,64})")


@dataclass(frozen=True, slots=True)
class ParsedKey:
    prefix: str
    secret: str


@dataclass(frozen=True, slots=True)
class NewKey:
    """A freshly made key: the full value (shown once) and what is stored of it."""

    value: str
    prefix: str
    secret_hash: str


def parse(value: str) -> ParsedKey | None:
    """Split a presented key into prefix and secret; ``None`` for anything not key-shaped."""
    if len(value) > MAX_KEY_LENGTH:
        return None
    match = _SHAPE.fullmatch(value)
    if match is None:
        return None
    return ParsedKey(prefix=match[1], secret=match[2])


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: str, stored_hash: str) -> bool:
    """Whether ``secret`` is the one whose hash was stored, in constant time."""
    return hmac.compare_digest(hash_secret(secret), stored_hash)


def generate(random_base62: Callable[[int], str]) -> NewKey:
    """A new key, drawing its parts from ``random_base62(length)``."""
    prefix = random_base62(PREFIX_LENGTH)
    secret = random_base62(SECRET_LENGTH)
    return NewKey(value=f"{TAG}{prefix}_{secret}", prefix=prefix, secret_hash=hash_secret(secret))


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, else ``None``.

    The scheme is case-insensitive (RFC 7235); anything else, including an empty token,
    is ``None``.
    """
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token
