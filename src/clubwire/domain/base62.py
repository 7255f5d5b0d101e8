"""Base62: the digits and ASCII letters that every identifier, key and secret is written in."""

from __future__ import annotations

import string

ALPHABET = string.digits + string.ascii_uppercase + string.ascii_lowercase  # in ASCII order


def encode(number: int, length: int) -> str:
    """``number`` (≥ 0) in ``length`` base62 digits, most significant first, zero-padded;
    the digits above ``length`` are dropped."""
    digits = []
    for _ in range(length):
        number, digit = divmod(number, 62)
        digits.append(ALPHABET[digit])
    return "".join(reversed(digits))
