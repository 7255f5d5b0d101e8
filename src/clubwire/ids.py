"""Prefixed, random identifiers: ``org_…``, ``key_…``, ``we_…``, ``evt_…``, ``usr_…``; and
``dlv_…``, whose first characters say when it was made."""

from __future__ import annotations

import secrets
import string
from datetime import datetime

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase  # in ASCII order
_ID_CHARS = 20  # 20 base62 characters hold about 119 bits
_TIME_CHARS = 8  # milliseconds since 1970 in base62: enough until the year 8800 or so


def random_base62(length: int) -> str:
    """A string of ``length`` characters drawn uniformly from the base62 alphabet."""
    return "".join(secrets.choice(BASE62) for _ in range(length))


def new_id(prefix: str) -> str:
    """A fresh identifier such as ``org_4Fh…``; ``prefix`` is given without the underscore."""
    return f"{prefix}_{random_base62(_ID_CHARS)}"


def new_sorted_id(prefix: str, moment: datetime) -> str:
    """A fresh identifier of ``new_id``'s shape whose first 8 characters are ``moment`` to the
    millisecond (the other 12 random, about 71 bits): identifiers made later sort later. Rows
    keyed by them go into an index next to one another rather than each onto a page of its
    own: the deliveries' attempts are recorded at a fraction of the cost (ADR 0008 session
    18)."""
    stamp = _base62(max(0, int(moment.timestamp() * 1000)), _TIME_CHARS)
    return f"{prefix}_{stamp}{random_base62(_ID_CHARS - _TIME_CHARS)}"


def _base62(number: int, length: int) -> str:
    """``number`` in ``length`` base62 digits, most significant first (zero-padded)."""
    digits = []
    for _ in range(length):
        number, digit = divmod(number, 62)
        digits.append(BASE62[digit])
    return "".join(reversed(digits))
