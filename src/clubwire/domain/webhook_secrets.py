"""Webhook signing secrets: ``whsec_`` and 32 base62 characters (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Callable

PREFIX = "whsec_"
LENGTH = 32


def generate(random_base62: Callable[[int], str]) -> str:
    """A new secret; the HMAC key is the UTF-8 of the whole string, prefix included."""
    return PREFIX + random_base62(LENGTH)
