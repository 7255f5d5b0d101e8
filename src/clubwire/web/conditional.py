"""Conditional requests (RFC 9110 §8.8.3, §13.1.2): an answer's entity tag, and whether an
``If-None-Match`` field names it. Pure functions; the club data API is their one user."""

from __future__ import annotations

import hashlib
import re

# An entity tag: an optional weakness indicator, then the opaque tag, quoted (RFC 9110 §8.8.3).
_TAG = r'(?:W/)?("[\x21\x23-\x7e\x80-\xff]*")'
# A list of them: empty elements and optional white space around the commas are allowed (§5.6.1).
_LIST = re.compile(rf"[ \t,]*{_TAG}(?:[ \t]*,[ \t,]*{_TAG})*[ \t,]*")
_OPAQUE = re.compile(_TAG)
ANY = "*"


def entity_tag(body: bytes) -> str:
    """The strong entity tag of ``body``: its SHA-256, first 128 bits in hex, quoted. Equal
    bytes get equal tags on every process; any other bytes, another tag."""
    return f'"{hashlib.sha256(body).hexdigest()[:32]}"'


def none_match(field: str, tag: str) -> bool:
    """Whether an ``If-None-Match`` field value (its lines joined with commas) holds ``tag``, by
    weak comparison (``W/"x"`` matches ``"x"``), or is ``*``: then the answer is 304.

    A value that is not a list of entity tags names nothing, so the full answer follows.
    """
    if field == tag or field.strip(" \t") == ANY:
        return True
    if _LIST.fullmatch(field) is None:
        return False
    return tag in _OPAQUE.findall(field)
