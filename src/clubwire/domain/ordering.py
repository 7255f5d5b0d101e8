"""Which resource an event is about (its ordering key), as pure rules.

Every event but a Send test's ``ping`` names the resource it is about, ``<resource>:<id>``,
and takes the next sequence of that key in its club (``services.delivery.events``): a game's
result and its correction, a member edited twice, an invoice's registration and then its
payment. Both travel in the envelope (``orderingKey``, ``sequence``); an endpoint that asks
for it gets each key's deliveries one at a time, in that order (ADR 0017).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

# ``<resource>:<platform id>``: the longest resource name, a colon and 128 characters.
KEY_LENGTH = 160
# The header of a delivery sent after an earlier delivery of its key died (or was erased)
# without reaching its receiver: that delivery's sequence.
MISSED_HEADER = "X-Service-Missed-Sequence"


class Place(NamedTuple):
    """An event's place: its ordering key, and its sequence among the key's events (from 1)."""

    key: str
    sequence: int


@dataclass(frozen=True, slots=True)
class Resource:
    """How one kind names its resource: in words (the catalog), and from its ``data``."""

    in_words: str
    key: Callable[[Mapping[str, Any]], str]


def _by(resource: str, *path: str) -> Callable[[Mapping[str, Any]], str]:
    def key(data: Mapping[str, Any]) -> str:
        found: Any = data
        for part in path:
            found = found[part]
        return f"{resource}:{found}"

    return key


def _registration(data: Mapping[str, Any]) -> str:
    """A registration's invoice, so that its payment follows it; without one, the enrollment."""
    invoice = data.get("invoice")
    if invoice is not None:
        return f"invoice:{invoice['id']}"
    return f"enrollment:{data['enrollment']['id']}"


RESOURCES: dict[str, Resource] = {
    "registration.created": Resource(
        "the invoice (`invoice:<invoice.id>`); a registration without one, its enrollment "
        "(`enrollment:<enrollment.id>`)",
        _registration,
    ),
    "payment.completed": Resource(
        "the invoice it pays (`invoice:<invoice.id>`)", _by("invoice", "invoice", "id")
    ),
    "game.updated": Resource("the game (`game:<game.id>`)", _by("game", "game", "id")),
    "member.updated": Resource("the member (`member:<member.id>`)", _by("member", "member", "id")),
    "practice_ice.booked": Resource(
        "the booking (`booking:<booking.id>`)", _by("booking", "booking", "id")
    ),
}


def key_of(kind: str, data: Mapping[str, Any]) -> str | None:
    """The ordering key of an event of ``kind`` whose ``data`` (JSON values, camelCase) was
    validated against its kind; None for a kind without one (``ping``)."""
    resource = RESOURCES.get(kind)
    return None if resource is None else resource.key(data)


def waiting_in_words(sequence: int, key: str) -> str:
    """Why a held delivery has no next attempt yet, for people."""
    return f"waiting for sequence {sequence} of {key} to be delivered"


def missed_in_words(sequence: int) -> str:
    """What a delivery sent with ``MISSED_HEADER`` tells its receiver, for people."""
    return (
        f"sent after sequence {sequence} of this resource died or was erased before it was "
        "delivered"
    )
