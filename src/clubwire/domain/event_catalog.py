"""The event catalog (SPEC §6, DESIGN §9): the kinds, their ``data`` models, and the envelope.

Each kind has its payload model (``payloads``), what it means (to developers, and to club
staff in plain words), and a sample generator (``samples``). ``validate`` checks a ``data``
against its kind, ``envelope`` writes the exact bytes a receiver gets, and ``sample`` makes a
realistic ``data``. The schemas that describe those bytes are in ``event_schemas``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from clubwire.domain import ordering, payloads, samples, timestamps


@dataclass(frozen=True, slots=True)
class Entry:
    """What the catalog holds for one kind."""

    model: type[payloads.Payload]
    summary: str
    fires_when: str
    for_staff: str  # one line in plain words, for the club staff who choose what to subscribe to
    sample: Callable[[datetime, random.Random], dict[str, object]]


PING = "ping"
_CATALOG: dict[str, Entry] = {
    "registration.created": Entry(
        payloads.RegistrationCreatedData,
        "A registration became active",
        "Fires when a registration becomes active: a storefront checkout, a payment webhook, "
        "or a proxy registration by staff.",
        "Someone registered for a program",
        samples.registration,
    ),
    "payment.completed": Entry(
        payloads.PaymentCompletedData,
        "A payment completed",
        "Fires when a card payment is authorised, a checkout is finalised with club credit or "
        "a gift card, or staff record an offline payment.",
        "Someone paid, online or at the club",
        samples.payment,
    ),
    "game.updated": Entry(
        payloads.GameUpdatedData,
        "A game changed",
        "Fires when a result is entered (reason result), or a game is moved or its teams "
        "changed (reason placement).",
        "A game's result was entered, or the game was moved or its teams changed",
        samples.game,
    ),
    "member.updated": Entry(
        payloads.MemberUpdatedData,
        "A member was created or edited",
        "Fires when a member is created or edited.",
        "A member was added or their details changed",
        samples.member,
    ),
    "practice_ice.booked": Entry(
        payloads.PracticeIceBookedData,
        "Practice ice was booked",
        "Fires when a curler, or staff for a curler, reserves practice ice.",
        "A curler booked practice ice",
        samples.practice_ice,
    ),
    PING: Entry(
        payloads.PingData,
        "A test event",
        "Sent when the user presses Send test, to that endpoint only, in a single attempt. "
        "Cannot be subscribed to.",
        "A test message, sent when you press Send test",
        samples.ping,
    ),
}

KINDS: tuple[str, ...] = tuple(_CATALOG)
SUBSCRIBABLE: tuple[str, ...] = tuple(kind for kind in KINDS if kind != PING)
# What each kind means to club staff, in plain words: the endpoint form and the receivers' guide.
FOR_STAFF: dict[str, str] = {kind: found.for_staff for kind, found in _CATALOG.items()}


class UnknownKind(ValueError):
    """An event kind that is not in the catalog."""

    def __init__(self, kind: object) -> None:
        self.kind = kind
        super().__init__(f"unknown event kind {kind!r}; known kinds: {', '.join(KINDS)}")


class InvalidData(ValueError):
    """A ``data`` payload that does not fit its kind; the message is one line."""

    def __init__(self, path: str, problem: str, others: int = 0) -> None:
        self.path = path
        self.problem = problem
        more = f" (and {others} more problem{'s' if others > 1 else ''})" if others else ""
        super().__init__(f"{path}: {problem}{more}")

    @classmethod
    def from_error(cls, error: ValidationError) -> InvalidData:
        errors = error.errors(include_url=False, include_input=False)
        first = errors[0]
        return cls(
            _path(first["loc"]),
            _problem(first["type"], first["msg"], first.get("ctx")),
            len(errors) - 1,
        )


def _path(loc: tuple[int | str, ...]) -> str:
    return "data" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def _problem(kind: str, message: str, context: dict[str, Any] | None) -> str:
    if kind == "extra_forbidden":
        return "unknown field (payloads accept only documented fields)"
    if kind == "value_error" and context and "error" in context:
        message = str(context["error"])
    return " ".join((message[:1].lower() + message[1:]).split())


def model_for(kind: str) -> type[BaseModel]:
    """The ``data`` model of ``kind``; raises ``UnknownKind``."""
    return entry(kind).model


def entry(kind: str) -> Entry:
    """The catalog entry of ``kind``; raises ``UnknownKind``."""
    found = _CATALOG.get(kind) if isinstance(kind, str) else None
    if found is None:
        raise UnknownKind(kind)
    return found


def validate(kind: str, data: object) -> BaseModel:
    """``data`` checked against the model of ``kind``; raises ``UnknownKind`` or ``InvalidData``."""
    model = model_for(kind)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise InvalidData.from_error(error) from error


def envelope(
    event_id: str,
    kind: str,
    created_at: datetime,
    organization_id: str,
    data: BaseModel | dict[str, Any],
    place: ordering.Place | None = None,
) -> bytes:
    """The exact bytes of an event: ``{"id","event","createdAt","organizationId",
    "orderingKey","sequence","data"}``, the ordering fields where it has a ``place`` (every
    kind but ``ping``); ``data`` is the kind's model, or its JSON values already dumped from
    one."""
    model = model_for(kind)
    if isinstance(data, BaseModel) and not isinstance(data, model):
        raise TypeError(f"data of {kind} must be a {model.__name__}, not {type(data).__name__}")
    if created_at.tzinfo is None:
        raise ValueError("created_at must be timezone-aware")
    placed = {} if place is None else {"orderingKey": place.key, "sequence": place.sequence}
    return orjson.dumps(
        {
            "id": event_id,
            "event": kind,
            "createdAt": timestamps.to_wire(created_at),
            "organizationId": organization_id,
            **placed,
            "data": data.model_dump(mode="json", by_alias=True)
            if isinstance(data, BaseModel)
            else data,
        }
    )


_ID_OPENING = b'{"id":"'


def id_of(body: bytes) -> str | None:
    """The event id of an ``envelope`` (its first field), read without parsing the rest;
    ``None`` for anything else."""
    start = len(_ID_OPENING)
    end = body.find(b'"', start)
    if not body.startswith(_ID_OPENING) or end < 0:
        return None
    return body[start:end].decode()


def sample(kind: str, now: datetime, rng: random.Random | None = None) -> dict[str, object]:
    """A realistic, valid ``data`` for ``kind`` around ``now`` (JSON-ready, camelCase).

    Without ``rng`` the result depends on ``now`` only.
    """
    return entry(kind).sample(now, rng or random.Random(timestamps.to_wire(now)))
