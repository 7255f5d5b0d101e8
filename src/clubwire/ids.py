"""Prefixed, random identifiers: ``org_…``, ``key_…``, ``we_…``, ``evt_…``, ``dlv_…``, ``usr_…``."""

from __future__ import annotations

import secrets
import string

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_ID_CHARS = 20  # 20 base62 characters hold about 119 bits


def random_base62(length: int) -> str:
    """A string of ``length`` characters drawn uniformly from the base62 alphabet."""
    return "".join(secrets.choice(BASE62) for _ in range(length))


def new_id(prefix: str) -> str:
    """A fresh identifier such as ``org_4Fh…``; ``prefix`` is given without the underscore."""
    return f"{prefix}_{random_base62(_ID_CHARS)}"
