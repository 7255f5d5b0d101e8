"""Why an endpoint is switched off (DESIGN §6): the code kept in ``endpoints.disabled_reason``
and given as ``disabledReason`` in ``--json``, and its words for people, which the settings
area and the CLI's plain output show.

Codes, not words, are stored, so each place can word a reason its own way (the failure email
says more than the settings area) and the words can change without touching the rows.
"""

from __future__ import annotations

from enum import StrEnum

from clubwire.domain import delivering


class OffReason(StrEnum):
    DEAD_IN_A_ROW = "dead_in_a_row"  # the worker, at the dead-in-a-row limit
    GONE = "gone"  # the worker, when the receiver answered 410 Gone
    STAFF = "staff"  # a club admin, in the settings area
    SUPERADMIN = "superadmin"  # a superadmin in the settings area, or the operator's CLI


_SWITCHED_OFF = "Switched off"  # the words of a stored value that is no code of ours

_WORDS: dict[str, str] = {
    OffReason.DEAD_IN_A_ROW: (
        f"Switched off after {delivering.DEAD_IN_A_ROW_LIMIT} dead deliveries in a row"
    ),
    OffReason.GONE: "Switched off: the receiver answered 410 Gone",
    OffReason.STAFF: "Switched off by a club admin",
    OffReason.SUPERADMIN: "Switched off by a superadmin",
}


def in_words(stored: str | None) -> str:
    """The reason as people read it; a value that is no code (None, or what an older
    version left) reads as a plain "Switched off"."""
    return _WORDS.get(stored or "", _SWITCHED_OFF)


def by_staff(superadmin: bool) -> OffReason:
    """The reason when staff switch an endpoint off: a superadmin's or a club admin's."""
    return OffReason.SUPERADMIN if superadmin else OffReason.STAFF
