"""Club identity rules."""

from __future__ import annotations

import re

SLUG_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
_SLUG = re.compile(SLUG_PATTERN)
SLUG_RULE = "1–63 lowercase letters, digits and hyphens, not starting or ending with a hyphen"


def is_slug(value: str) -> bool:
    """Whether ``value`` can name a club: it is also a host name label (DESIGN §5)."""
    return _SLUG.fullmatch(value) is not None
