"""The scopes an API key can carry (SPEC §5.2)."""

from __future__ import annotations

from collections.abc import Iterable

READ_PROGRAMS = "read:programs"
ALL = (READ_PROGRAMS, "read:members", "read:invoices", "read:games")


class UnknownScope(ValueError):
    """A scope that is not one of ``ALL``."""


def normalise(scopes: Iterable[str]) -> tuple[str, ...]:
    """The chosen scopes, de-duplicated, in catalogue order; at least one, all known."""
    chosen = set(scopes)
    unknown = sorted(chosen.difference(ALL))
    if unknown:
        raise UnknownScope(f"Unknown scope {', '.join(unknown)}: choose from {', '.join(ALL)}.")
    if not chosen:
        raise UnknownScope(f"Choose at least one scope: {', '.join(ALL)}.")
    return tuple(scope for scope in ALL if scope in chosen)


def encode(scopes: Iterable[str]) -> str:
    """Scopes as stored: one space-separated string."""
    return " ".join(scopes)


def decode(stored: str) -> tuple[str, ...]:
    return tuple(stored.split())
