"""Timestamps on the wire: ISO 8601 UTC with milliseconds, ``2026-01-13T18:30:00.000Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def to_wire(moment: datetime) -> str:
    """Format an aware datetime the one way clubwire writes timestamps."""
    utc = moment.astimezone(UTC)
    return f"{utc.year:04d}-" + utc.strftime("%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def utc_now() -> datetime:
    return datetime.now(UTC)


def to_wire_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else to_wire(moment)
