"""The event catalog (SPEC §6, DESIGN §9): the kinds, their ``data`` models, and the envelope.

Every payload model forbids unknown fields at every level, so the platform cannot leak personal
data (a phone number, an address, a birth date) by sending more than is documented. JSON field
names are camelCase; timestamps are written the one clubwire way (``timestamps.to_wire``); money
is a decimal with at most two places, written as a JSON number.

Small value sets chosen here (lower-case, like the sets DESIGN §9 names):

- enrollment status: ``active`` (the usual case: the event fires when a registration becomes
  active), ``pending_payment``, ``waitlisted``;
- invoice status: ``open``, ``partially_paid``, ``paid``, ``void``;
- game status: ``scheduled``, ``in_progress``, ``final``, ``postponed``, ``cancelled``;
- member status: ``active``, ``inactive``, ``pending``.

Schemas: ``json_schemas()`` gives one self-contained JSON Schema per kind (its ``$defs`` inline,
for receivers that validate one kind); ``openapi_webhooks()`` gives the OpenAPI 3.1 ``webhooks``
section plus the component schemas it references (``#/components/schemas/...``), to be merged
into ``components.schemas``. Both describe the bytes a receiver gets (serialization mode).
"""

from __future__ import annotations

import functools
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal, cast, get_args

import orjson
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    create_model,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import models_json_schema

from clubwire.domain import timestamps
from clubwire.domain.programs import EARLIEST, LATEST, ProgramType

# --------------------------------------------------------------------------- value types

EnrollmentStatus = Literal["active", "pending_payment", "waitlisted"]
EnrollmentChannel = Literal["storefront", "payment_webhook", "proxy"]
InvoiceStatus = Literal["open", "partially_paid", "paid", "void"]
PaymentMethod = Literal["card", "club_credit", "gift_card", "cash", "cheque", "e_transfer", "other"]
PaymentSource = Literal["card_authorization", "checkout", "staff"]
GameStatus = Literal["scheduled", "in_progress", "final", "postponed", "cancelled"]
GameReason = Literal["result", "placement"]
SideResult = Literal["win", "loss", "tie"]
MemberStatus = Literal["active", "inactive", "pending"]
MemberChange = Literal["created", "updated"]
BookedBy = Literal["member", "staff"]

_EMAIL = re.compile(r"[^@\s\x00-\x1f\x7f]+@[^@.\s\x00-\x1f\x7f]+(?:\.[^@.\s\x00-\x1f\x7f]+)+")
_EMAIL_MAX = 254
_ISO_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}")
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")


def _shaped(kind: type, shape: re.Pattern[str], expected: str) -> Callable[[object], object]:
    """A before-validator: accept ``kind`` instances, or text of the given shape only.

    Pydantic's lax mode would otherwise read numbers (and digit strings) as Unix times.
    """

    def check(value: object) -> object:
        if isinstance(value, kind) or (isinstance(value, str) and shape.match(value)):
            return value
        raise ValueError(f"must be {expected}")

    return check


def _plausible(moment: datetime) -> datetime:
    if not EARLIEST <= moment <= LATEST:
        raise ValueError("must lie between the years 1900 and 2999")
    return moment


def _email(value: str) -> str:
    if len(value) > _EMAIL_MAX or not _EMAIL.fullmatch(value):
        raise ValueError("value is not a valid email address")
    return value


PlatformId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")]
Label = Annotated[str, Field(min_length=1, max_length=200)]
Email = Annotated[
    str,
    AfterValidator(_email),
    WithJsonSchema({"type": "string", "format": "email", "maxLength": _EMAIL_MAX}),
]
Timestamp = Annotated[
    AwareDatetime,
    BeforeValidator(
        _shaped(datetime, _ISO_DATETIME, "an ISO 8601 timestamp with a UTC offset or Z")
    ),
    AfterValidator(_plausible),
    PlainSerializer(timestamps.to_wire, return_type=str, when_used="json"),
    WithJsonSchema(
        {"type": "string", "format": "date-time", "examples": ["2026-01-13T18:30:00.000Z"]}
    ),
]
CalendarDate = Annotated[
    date,
    BeforeValidator(_shaped(date, _ISO_DATE, "a date YYYY-MM-DD")),
    WithJsonSchema({"type": "string", "format": "date", "examples": ["2026-01-17"]}),
]
ClockTime = Annotated[str, Field(pattern=r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]$", examples=["18:30"])]
Money = Annotated[
    Decimal,
    Field(ge=0, max_digits=12, decimal_places=2, allow_inf_nan=False),
    PlainSerializer(float, return_type=float, when_used="json"),
    WithJsonSchema(
        {"type": "number", "minimum": 0, "maximum": 9_999_999_999.99, "examples": [367.25]}
    ),
]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$", examples=["CAD"])]


# --------------------------------------------------------------------------- payload models


class _Payload(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
        json_schema_serialization_defaults_required=True,
        field_title_generator=lambda name, _: name.replace("_", " ").capitalize(),
    )


class _Named(_Payload):
    id: PlatformId = Field(description="The platform's identifier.")
    name: Label = Field(description="The name shown to people.")


class ProgramRef(_Named):
    """The program an event concerns."""

    type: ProgramType = Field(description="The kind of program.")


class MemberRef(_Named):
    """A person: only a name and an email, never more."""

    email: Email = Field(description="The person's email address.")


class MemberInfo(MemberRef):
    """A member record as far as events show it."""

    status: MemberStatus = Field(description="active, inactive, or pending (not yet approved).")


class EnrollmentInfo(_Payload):
    """A registration of a member in a program."""

    id: PlatformId = Field(description="The platform's identifier of the enrollment.")
    status: EnrollmentStatus = Field(
        description="active (the usual case), pending_payment, or waitlisted."
    )
    channel: EnrollmentChannel = Field(
        description="How it came about: storefront checkout, a payment webhook, or staff (proxy)."
    )
    created_at: Timestamp = Field(description="When the registration was made.")


class InvoiceRef(_Payload):
    """A reference to an invoice."""

    id: PlatformId = Field(description="The platform's identifier of the invoice.")
    number: Label = Field(description="The invoice number printed on it.")


class InvoiceInfo(InvoiceRef):
    """An invoice with its total and status."""

    total: Money = Field(description="The invoice total, taxes included.")
    status: InvoiceStatus = Field(description="open, partially_paid, paid, or void.")


class PaymentInfo(_Payload):
    """A completed payment."""

    id: PlatformId = Field(description="The platform's identifier of the payment.")
    amount: Money = Field(description="The amount paid, in currency units (not cents).")
    currency: Currency = Field(description="ISO 4217 currency code.")
    method: PaymentMethod = Field(description="How the payment was made.")
    source: PaymentSource = Field(
        description=(
            "What completed it: a card authorisation, a checkout finalised with club credit "
            "or a gift card, or staff recording an offline payment."
        )
    )
    completed_at: Timestamp = Field(description="When the payment completed.")


class GameInfo(_Payload):
    """A scheduled game."""

    id: PlatformId = Field(description="The platform's identifier of the game.")
    sheet: Label = Field(description="The sheet of ice, e.g. Sheet C.")
    scheduled_at: Timestamp = Field(description="When the game starts.")
    status: GameStatus = Field(
        description="scheduled, in_progress, final, postponed, or cancelled."
    )


class DivisionRef(_Named):
    """A division of a league or bonspiel."""


class RoundRef(_Named):
    """A round of a league or bonspiel."""


class DrawRef(_Named):
    """A draw: the games that start together."""

    starts_at: Timestamp = Field(description="When the draw starts.")


class TeamRef(_Named):
    """A team."""


class Side(_Payload):
    """One team in a game, with its score and result once entered."""

    team: TeamRef = Field(description="The team.")
    score: int | None = Field(
        default=None, ge=0, le=999, description="Points scored; null until a result is entered."
    )
    result: SideResult | None = Field(
        default=None, description="win, loss, or tie; null until a result is entered."
    )


class ReservationInfo(_Payload):
    """A reservation of practice ice."""

    id: PlatformId = Field(description="The platform's identifier of the reservation.")
    sheet: Label = Field(description="The sheet of ice, e.g. Sheet A.")
    date: CalendarDate = Field(description="The club's local date, YYYY-MM-DD.")
    start_time: ClockTime = Field(description="Local start time, HH:MM (24-hour).")
    end_time: ClockTime = Field(description="Local end time, HH:MM (24-hour), after startTime.")

    @field_validator("end_time")
    @classmethod
    def _ends_after_start(cls, value: str, info: ValidationInfo) -> str:
        start = info.data.get("start_time")
        if isinstance(start, str) and value <= start:
            raise ValueError("must be after startTime")
        return value


class BookingInfo(_Payload):
    """Who booked, and when."""

    id: PlatformId = Field(description="The platform's identifier of the booking.")
    booked_by: BookedBy = Field(description="member (the curler) or staff (for the curler).")
    created_at: Timestamp = Field(description="When the booking was made.")


class RegistrationCreatedData(_Payload):
    """The `data` of a `registration.created` event."""

    enrollment: EnrollmentInfo = Field(description="The registration.")
    program: ProgramRef = Field(description="The program registered for.")
    member: MemberRef = Field(description="The registrant.")
    invoice: InvoiceInfo | None = Field(
        default=None, description="The invoice raised, or null when there is none."
    )


class PaymentCompletedData(_Payload):
    """The `data` of a `payment.completed` event."""

    payment: PaymentInfo = Field(description="The payment.")
    invoice: InvoiceRef = Field(description="The invoice it pays.")


class GameUpdatedData(_Payload):
    """The `data` of a `game.updated` event."""

    game: GameInfo = Field(description="The game.")
    program: ProgramRef = Field(description="The league or bonspiel it belongs to.")
    division: DivisionRef | None = Field(default=None, description="Its division, if any.")
    round: RoundRef | None = Field(default=None, description="Its round, if any.")
    draw: DrawRef | None = Field(default=None, description="Its draw, if any.")
    sides: list[Side] = Field(
        min_length=2, max_length=16, description="The teams playing: two or more."
    )
    reason: GameReason = Field(
        description="result: a result was entered; placement: the game was moved or its teams "
        "changed."
    )


class MemberUpdatedData(_Payload):
    """The `data` of a `member.updated` event."""

    member: MemberInfo = Field(description="The member as it now stands.")
    change: MemberChange = Field(description="created or updated.")


class PracticeIceBookedData(_Payload):
    """The `data` of a `practice_ice.booked` event."""

    reservation: ReservationInfo = Field(description="The ice reserved.")
    booking: BookingInfo = Field(description="The booking.")
    member: MemberRef = Field(description="The curler the ice is for.")


class PingData(_Payload):
    """The `data` of a `ping` event."""

    message: str = Field(min_length=1, max_length=1000, description="A human-readable note.")


# --------------------------------------------------------------------------- samples

_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_TAX = Decimal("1.13")  # Ontario HST
_CENT = Decimal("0.01")
_PEOPLE = (
    ("Marie-Ève Tremblay", "marie-eve.tremblay@example.com"),
    ("Liam MacDonald", "liam.macdonald@example.com"),
    ("Priya Sharma", "priya.sharma@example.com"),
    ("Jean-François Gagnon", "jf.gagnon@example.com"),
    ("Sarah Thompson", "sarah.thompson@example.com"),
    ("Noah Campbell", "noah.campbell@example.com"),
    ("Olivia Chen", "olivia.chen@example.com"),
    ("Ethan Robertson", "ethan.robertson@example.com"),
    ("Chloé Bouchard", "chloe.bouchard@example.com"),
    ("Mateo Kowalski", "mateo.kowalski@example.com"),
)
_PROGRAMS = (
    ("prg_tuesday_night_league", "Tuesday Night League", ProgramType.LEAGUE, "325.00"),
    ("prg_thursday_mixed_league", "Thursday Mixed League", ProgramType.LEAGUE, "295.00"),
    (
        "prg_learn_to_curl_winter",
        "Learn to Curl — Winter Session",
        ProgramType.LEARN_TO_CURL,
        "180.00",
    ),
    ("prg_mixed_doubles_bonspiel", "Mixed Doubles Bonspiel", ProgramType.BONSPIEL, "120.00"),
    ("prg_junior_skills_clinic", "Junior Skills Clinic", ProgramType.CLINIC, "0.00"),
    ("prg_friday_drop_in", "Friday Night Drop-In", ProgramType.DROP_IN, "15.00"),
)
_COMPETITIONS = tuple(p for p in _PROGRAMS if p[2] in (ProgramType.LEAGUE, ProgramType.BONSPIEL))
_TEAMS = (
    "Team Fleury", "Team Homan", "Team Jacobs", "Team Gushue",
    "Team Einarson", "Team Koe", "Team Dunstone", "Team Carey",
)  # fmt: skip
_SHEETS = tuple(f"Sheet {letter}" for letter in "ABCDEF")
_PAYMENT_ROUTES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("card_authorization", ("card",)),
    ("checkout", ("club_credit", "gift_card")),
    ("staff", ("cash", "cheque", "e_transfer", "other")),
)


def _token(rng: random.Random, prefix: str) -> str:
    return f"{prefix}_{''.join(rng.choices(_BASE62, k=12))}"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _person(rng: random.Random) -> dict[str, object]:
    name, email = rng.choice(_PEOPLE)
    return {"id": f"mbr_{_slug(email.partition('@')[0])}", "name": name, "email": email}


def _program(entry: tuple[str, str, ProgramType, str]) -> dict[str, object]:
    return {"id": entry[0], "name": entry[1], "type": entry[2].value}


def _invoice_number(rng: random.Random, now: datetime) -> str:
    return f"INV-{now.year}-{rng.randint(1, 9999):05d}"


def _registration(now: datetime, rng: random.Random) -> dict[str, object]:
    entry = rng.choice(_PROGRAMS)
    channel = rng.choice(get_args(EnrollmentChannel))
    total = (Decimal(entry[3]) * _TAX).quantize(_CENT)
    invoice = {
        "id": _token(rng, "inv"),
        "number": _invoice_number(rng, now),
        "total": float(total),
        "status": "open" if channel == "proxy" else "paid",
    }
    return {
        "enrollment": {
            "id": _token(rng, "enr"),
            "status": "active",
            "channel": channel,
            "createdAt": timestamps.to_wire(now),
        },
        "program": _program(entry),
        "member": _person(rng),
        "invoice": invoice if total else None,
    }


def _payment(now: datetime, rng: random.Random) -> dict[str, object]:
    source, methods = rng.choice(_PAYMENT_ROUTES)
    price = Decimal(rng.choice([p for p in _PROGRAMS if p[3] != "0.00"])[3])
    return {
        "payment": {
            "id": _token(rng, "pay"),
            "amount": float((price * _TAX).quantize(_CENT)),
            "currency": "CAD",
            "method": rng.choice(methods),
            "source": source,
            "completedAt": timestamps.to_wire(now - timedelta(seconds=rng.randint(0, 5))),
        },
        "invoice": {"id": _token(rng, "inv"), "number": _invoice_number(rng, now)},
    }


def _sides(rng: random.Random, played: bool) -> list[dict[str, object]]:
    names = rng.sample(_TEAMS, 2)
    scores = [rng.randint(2, 10), rng.randint(2, 10)] if played else [None, None]
    sides: list[dict[str, object]] = []
    for name, score, other in zip(names, scores, reversed(scores), strict=True):
        result = None
        if score is not None and other is not None:
            result = "win" if score > other else "loss" if score < other else "tie"
        team = {"id": f"team_{_slug(name.split()[-1])}", "name": name}
        sides.append({"team": team, "score": score, "result": result})
    return sides


def _game(now: datetime, rng: random.Random) -> dict[str, object]:
    reason = rng.choice(get_args(GameReason))
    played = reason == "result"
    quarter = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
    starts = quarter - timedelta(hours=2) if played else quarter + timedelta(days=7)
    draw = rng.randint(1, 12)
    division = rng.choice(("A", "B", None))
    return {
        "game": {
            "id": _token(rng, "gm"),
            "sheet": rng.choice(_SHEETS),
            "scheduledAt": timestamps.to_wire(starts),
            "status": "final" if played else "scheduled",
        },
        "program": _program(rng.choice(_COMPETITIONS)),
        "division": division and {"id": f"div_{division.lower()}", "name": f"Division {division}"},
        "round": {"id": f"rnd_week_{draw}", "name": f"Week {draw}"},
        "draw": {
            "id": f"drw_{draw}",
            "name": f"Draw {draw}",
            "startsAt": timestamps.to_wire(starts),
        },
        "sides": _sides(rng, played),
        "reason": reason,
    }


def _member(_now: datetime, rng: random.Random) -> dict[str, object]:
    change = rng.choice(get_args(MemberChange))
    status = rng.choice(("pending", "active") if change == "created" else ("active", "inactive"))
    return {"member": {**_person(rng), "status": status}, "change": change}


def _practice_ice(now: datetime, rng: random.Random) -> dict[str, object]:
    day = (now + timedelta(days=rng.randint(1, 7))).date()
    start = datetime.combine(day, time(rng.choice((6, 7, 12, 13, 16, 20)), rng.choice((0, 30))))
    end = start + timedelta(minutes=rng.choice((60, 90)))
    return {
        "reservation": {
            "id": _token(rng, "res"),
            "sheet": rng.choice(_SHEETS),
            "date": day.isoformat(),
            "startTime": start.strftime("%H:%M"),
            "endTime": end.strftime("%H:%M"),
        },
        "booking": {
            "id": _token(rng, "bkg"),
            "bookedBy": rng.choice(get_args(BookedBy)),
            "createdAt": timestamps.to_wire(now),
        },
        "member": _person(rng),
    }


def _ping(_now: datetime, _rng: random.Random) -> dict[str, object]:
    return {"message": "Test event from clubwire. If you can read this, your endpoint works."}


# --------------------------------------------------------------------------- the catalog


@dataclass(frozen=True, slots=True)
class _Kind:
    model: type[_Payload]
    summary: str
    fires_when: str
    sample: Callable[[datetime, random.Random], dict[str, object]]


PING = "ping"
_CATALOG: dict[str, _Kind] = {
    "registration.created": _Kind(
        RegistrationCreatedData,
        "A registration became active",
        "Fires when a registration becomes active: a storefront checkout, a payment webhook, "
        "or a proxy registration by staff.",
        _registration,
    ),
    "payment.completed": _Kind(
        PaymentCompletedData,
        "A payment completed",
        "Fires when a card payment is authorised, a checkout is finalised with club credit or "
        "a gift card, or staff record an offline payment.",
        _payment,
    ),
    "game.updated": _Kind(
        GameUpdatedData,
        "A game changed",
        "Fires when a result is entered (reason result), or a game is moved or its teams "
        "changed (reason placement).",
        _game,
    ),
    "member.updated": _Kind(
        MemberUpdatedData,
        "A member was created or edited",
        "Fires when a member is created or edited.",
        _member,
    ),
    "practice_ice.booked": _Kind(
        PracticeIceBookedData,
        "Practice ice was booked",
        "Fires when a curler, or staff for a curler, reserves practice ice.",
        _practice_ice,
    ),
    PING: _Kind(
        PingData,
        "A test event",
        "Sent when the user presses Send test, to that endpoint only, in a single attempt. "
        "Cannot be subscribed to.",
        _ping,
    ),
}

KINDS: tuple[str, ...] = tuple(_CATALOG)
SUBSCRIBABLE: tuple[str, ...] = tuple(kind for kind in KINDS if kind != PING)


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
    return _entry(kind).model


def _entry(kind: str) -> _Kind:
    entry = _CATALOG.get(kind) if isinstance(kind, str) else None
    if entry is None:
        raise UnknownKind(kind)
    return entry


def validate(kind: str, data: object) -> BaseModel:
    """``data`` checked against the model of ``kind``; raises ``UnknownKind`` or ``InvalidData``."""
    model = model_for(kind)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise InvalidData.from_error(error) from error


def envelope(
    event_id: str, kind: str, created_at: datetime, organization_id: str, data: BaseModel
) -> bytes:
    """The exact bytes of an event: ``{"id","event","createdAt","organizationId","data"}``."""
    model = model_for(kind)
    if not isinstance(data, model):
        raise TypeError(f"data of {kind} must be a {model.__name__}, not {type(data).__name__}")
    if created_at.tzinfo is None:
        raise ValueError("created_at must be timezone-aware")
    return orjson.dumps(
        {
            "id": event_id,
            "event": kind,
            "createdAt": timestamps.to_wire(created_at),
            "organizationId": organization_id,
            "data": data.model_dump(mode="json", by_alias=True),
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
    entry = _entry(kind)
    return entry.sample(now, rng or random.Random(timestamps.to_wire(now)))


# --------------------------------------------------------------------------- schemas

SCHEMA_REF_TEMPLATE = "#/components/schemas/{model}"
_EXAMPLE_MOMENT = datetime.fromisoformat("2026-01-13T18:30:00+00:00")
_EXAMPLE_EVENT_ID = "evt_2Rk8fV1nQ7xLm3Pz9WcT"
_EXAMPLE_ORGANIZATION_ID = "org_3kT9wQ2mZx7LpR4vN8cY"


def _pascal(kind: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[._]", kind))


@functools.cache
def _envelope_model(kind: str) -> type[BaseModel]:
    """A documentation model of the whole envelope of ``kind``."""
    entry = _entry(kind)
    return create_model(
        f"{_pascal(kind)}Event",
        __base__=_Payload,
        __doc__=f"The envelope of a `{kind}` event.",
        id=(
            str,
            Field(
                pattern=r"^evt_[0-9A-Za-z]+$",
                description="The event id; the same on every endpoint the event fans out to, "
                "so receivers can de-duplicate on it.",
            ),
        ),
        event=(cast(Any, Literal)[kind], Field(description="The event kind.")),
        created_at=(Timestamp, Field(description="When the event was published.")),
        organization_id=(
            str,
            Field(pattern=r"^org_[0-9A-Za-z]+$", description="The club's identifier."),
        ),
        data=(entry.model, Field(description="The event payload.")),
    )


def json_schemas() -> dict[str, dict[str, object]]:
    """One self-contained JSON Schema per kind, of the whole envelope (local ``$defs``)."""
    return {
        kind: _envelope_model(kind).model_json_schema(by_alias=True, mode="serialization")
        for kind in KINDS
    }


def example(kind: str) -> dict[str, object]:
    """The envelope of a fixed sample of ``kind``, as a receiver parses it."""
    data = validate(kind, sample(kind, _EXAMPLE_MOMENT, random.Random(0)))
    body = envelope(_EXAMPLE_EVENT_ID, kind, _EXAMPLE_MOMENT, _EXAMPLE_ORGANIZATION_ID, data)
    parsed: dict[str, object] = orjson.loads(body)
    return parsed


def _headers(kind: str) -> list[dict[str, object]]:
    def header(
        name: str, description: str, schema: dict[str, object], value: str
    ) -> dict[str, object]:
        return {
            "name": name,
            "in": "header",
            "required": True,
            "description": description,
            "schema": schema,
            "example": value,
        }

    return [
        header(
            "X-Service-Signature",
            "`t=<unix seconds>,v1=<hex>`: v1 is the hex HMAC-SHA256 of `<t>.<raw body>`, keyed "
            "with the endpoint's secret. Reject a delivery whose t is more than 300 s from now.",
            {"type": "string", "pattern": r"^t=[0-9]+,v1=[0-9a-f]{64}$"},
            f"t={int(_EXAMPLE_MOMENT.timestamp())},v1={'5f' * 32}",
        ),
        header("X-Service-Event", "The event kind.", {"type": "string", "const": kind}, kind),
        header(
            "X-Service-Delivery",
            "The delivery id; the same on every attempt of this delivery.",
            {"type": "string", "pattern": r"^dlv_[0-9A-Za-z]+$"},
            "dlv_7hQ2mX9kV4pL8nR3wZ5c",
        ),
    ]


def _webhook(kind: str, schema_ref: dict[str, Any]) -> dict[str, object]:
    entry = _entry(kind)
    return {
        "post": {
            "summary": entry.summary,
            "description": entry.fires_when,
            "operationId": _pascal(kind)[:1].lower() + _pascal(kind)[1:],
            "parameters": _headers(kind),
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": schema_ref, "example": example(kind)}},
            },
            "responses": {
                "2XX": {"description": "Delivered. Anything else, a redirect included, is retried."}
            },
        }
    }


def openapi_webhooks() -> tuple[dict[str, object], dict[str, object]]:
    """``(webhooks, component_schemas)`` for an OpenAPI 3.1 document.

    Each webhook's request body is a ``$ref`` into ``#/components/schemas``; merge the second
    value into ``components.schemas``.
    """
    models = {kind: _envelope_model(kind) for kind in KINDS}
    refs, top = models_json_schema(
        [(model, "serialization") for model in models.values()],
        by_alias=True,
        ref_template=SCHEMA_REF_TEMPLATE,
    )
    webhooks: dict[str, object] = {
        kind: _webhook(kind, refs[(model, "serialization")]) for kind, model in models.items()
    }
    components: dict[str, object] = dict(top.get("$defs", {}))
    return webhooks, components
