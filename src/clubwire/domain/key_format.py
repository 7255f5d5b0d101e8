"""The API key format ``cw_live_<prefix>_<secret>`` (DESIGN §4), as pure functions.

The prefix is public (shown in lists, logged, used to look the key up); only a SHA-256
of the secret part is ever stored. The secret carries about 190 random bits, so a plain hash
is as strong as a slow one here and costs a microsecond on the request path.

A key made since issue 13 ends its secret with a checksum, as GitHub's tokens do: the CRC32
(IEEE 802.3, as ``zlib.crc32``) of the ASCII bytes of everything before it, tag and prefix
included, written as 6 base62 digits (``0-9A-Za-z``, most significant first, zero-padded).
So a mistyped, truncated or random key is refused without a database read, and a secret
scanner can tell a real key from lookalikes. A key made before has a 32-character secret and
no checksum: the length alone tells the two apart (``docs/api.md``, Keys).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from clubwire.domain import base62

TAG = "cw_live_"
PREFIX_LENGTH = 10
RANDOM_LENGTH = 32  # random base62 characters at the start of every secret
CHECKSUM_LENGTH = 6  # 62**6 > 2**32: six base62 digits hold any CRC32
SECRET_LENGTH = RANDOM_LENGTH + CHECKSUM_LENGTH
LEGACY_SECRET_LENGTH = RANDOM_LENGTH  # a key made before checksums
MAX_KEY_LENGTH = 128

# Every key clubwire has made, old and new, and nothing else: published in docs/api.md for
# secret scanners. Portable: the same in PCRE, RE2, JavaScript and Python.
PATTERN = r"\bcw_live_[0-9A-Za-z]{10}_[0-9A-Za-z]{32}(?:[0-9A-Za-z]{6})?\b"
_SHAPE = re.compile(PATTERN)


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
    """Split a presented key into prefix and secret; ``None`` for anything not key-shaped.

    A key-shaped value may still fail its checksum: see :func:`checksum_holds`.
    """
    if len(value) > MAX_KEY_LENGTH or _SHAPE.fullmatch(value) is None:
        return None
    prefix, secret = value[len(TAG) :].split("_")
    return ParsedKey(prefix=prefix, secret=secret)


def checksum(text: str) -> str:
    """The CRC32 of ``text``'s ASCII bytes as 6 base62 digits, zero-padded."""
    return base62.encode(zlib.crc32(text.encode("ascii")), CHECKSUM_LENGTH)


def checksum_holds(key: ParsedKey) -> bool:
    """Whether the key's last 6 characters are the checksum of the rest of it; a key made
    before checksums (a 32-character secret) has none, and passes."""
    if len(key.secret) == LEGACY_SECRET_LENGTH:
        return True
    body, check = key.secret[:-CHECKSUM_LENGTH], key.secret[-CHECKSUM_LENGTH:]
    return checksum(f"{TAG}{key.prefix}_{body}") == check


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: str, stored_hash: str) -> bool:
    """Whether ``secret`` is the one whose hash was stored, in constant time."""
    return hmac.compare_digest(hash_secret(secret), stored_hash)


def generate(random_base62: Callable[[int], str]) -> NewKey:
    """A new key, drawing its parts from ``random_base62(length)``, with its checksum."""
    prefix = random_base62(PREFIX_LENGTH)
    unchecked = f"{TAG}{prefix}_{random_base62(RANDOM_LENGTH)}"
    value = unchecked + checksum(unchecked)
    secret = value[-SECRET_LENGTH:]
    return NewKey(value=value, prefix=prefix, secret_hash=hash_secret(secret))


def expired(expires_at: datetime | None, now: datetime) -> bool:
    """Whether a key that expires at ``expires_at`` (``None``: never) has expired by ``now``."""
    return expires_at is not None and expires_at <= now


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
