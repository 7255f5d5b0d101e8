"""An endpoint's deliveries a page at a time (issue 15, item 6): the filters people type and
the opaque cursor of "Older" and "Newer", both read where they come in, so that a tampered
value is a message, never an error deeper down.

Pages are keyset pages on (created, id), newest first: a page is found by where the last one
ended, not by counting rows from the start, so page 20,000 costs what page 1 does.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from clubwire import errors
from clubwire.domain import event_catalog, replay_window, text
from clubwire.domain.delivering import Status

PAGE_SIZE = 50
KINDS: tuple[str, ...] = event_catalog.KINDS
STATUSES: tuple[Status, ...] = tuple(Status)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CURSOR = re.compile(r"[A-Za-z0-9_-]{1,80}")  # ours are about 50 characters
_INSIDE = re.compile(r"(0|[1-9][0-9]{0,17})\.(dlv_[A-Za-z0-9]{1,40})")
_BAD_CURSOR = "This page link is not valid (it may have been cut short): start from the newest."


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a page ends: the created time and id of its last (or first) delivery."""

    created_at: datetime
    id: str

    def encode(self) -> str:
        """Opaque to people: base64url of the time in microseconds and the id."""
        micros = (self.created_at - _EPOCH) // timedelta(microseconds=1)
        raw = f"{micros}.{self.id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, value: str) -> Cursor:
        """The cursor a page link carries; InvalidInput for anything else."""
        if _CURSOR.fullmatch(value) is None:
            raise errors.InvalidInput(_BAD_CURSOR)
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
            found = _INSIDE.fullmatch(raw)
            if found is None:
                raise ValueError(raw)
            created = _EPOCH + timedelta(microseconds=int(found.group(1)))
        except (ValueError, binascii.Error, OverflowError):  # not base64, UTF-8, or a time
            raise errors.InvalidInput(_BAD_CURSOR) from None
        return cls(created, found.group(2))


@dataclass(frozen=True, slots=True)
class Filters:
    """Deliveries of one ``status`` and one event ``kind`` (None: any), created from
    ``since`` (inclusive) to ``until`` (exclusive) when given."""

    status: Status | None = None
    kind: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def status(value: str) -> Status | None:
    """A status chosen in the form ("": any)."""
    if not value:
        return None
    if value not in STATUSES:
        raise errors.InvalidInput(
            f"{_quoted(value)} is not a status: choose from {', '.join(STATUSES)}."
        )
    return Status(value)


def kind(value: str) -> str | None:
    """An event kind chosen in the form ("": any)."""
    if not value:
        return None
    if value not in KINDS:
        raise errors.InvalidInput(
            f"{_quoted(value)} is not an event kind: choose from {', '.join(KINDS)}."
        )
    return value


def since(value: str) -> datetime | None:
    """From this minute on (""): no bound."""
    return replay_window.minute(value, "From") if value else None


def until(value: str) -> datetime | None:
    """Up to and including this minute: the bound is the minute after it ("": no bound)."""
    return replay_window.minute(value, "To") + timedelta(minutes=1) if value else None


def _quoted(value: str) -> str:
    return f'"{text.cleaned(value, 40)}"'
