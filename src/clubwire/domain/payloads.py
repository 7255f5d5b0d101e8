"""The payloads of events: the value types and the Pydantic models of each kind's ``data``.

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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic.alias_generators import to_camel

from clubwire.domain import text, timestamps
from clubwire.domain.program_wire import (
    EARLIEST,
    LATEST,
    PLAUSIBLE_YEAR,
    ProgramType,
    json_number,
)

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
Label = Annotated[text.StorableText, Field(min_length=1, max_length=200)]
Email = Annotated[
    text.StorableText,
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
        {
            "type": "string",
            "format": "date-time",
            "pattern": PLAUSIBLE_YEAR,
            "examples": ["2026-01-13T18:30:00.000Z"],
        }
    ),
]
CalendarDate = Annotated[
    date,
    BeforeValidator(_shaped(date, _ISO_DATE, "a date YYYY-MM-DD")),
    WithJsonSchema({"type": "string", "format": "date", "examples": ["2026-01-17"]}),
]
ClockTime = Annotated[str, Field(pattern=r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]$", examples=["18:30"])]
# Numbers are JSON numbers, as the schemas say: text and booleans are refused (Pydantic alone
# reads "5" and true as numbers). A whole number written 5.0 is an integer to JSON Schema, so
# a score takes it; 5.5 it refuses. Text already refuses numbers and booleans; timestamps and
# dates take only text of their shape (``_shaped``). Pydantic's strict mode is not the rule
# here: from Python it wants Decimal and datetime objects, where JSON has numbers and text.
# Constraints go before the validator, or the schema would not show them.
Score = Annotated[int, Field(ge=0, le=999), BeforeValidator(json_number)]
Money = Annotated[
    Decimal,
    Field(ge=0, max_digits=12, decimal_places=2, allow_inf_nan=False),
    BeforeValidator(json_number),
    PlainSerializer(float, return_type=float, when_used="json"),
    WithJsonSchema(
        {
            "type": "number",
            "minimum": 0,
            "maximum": 9_999_999_999.99,
            "multipleOf": 0.01,
            "examples": [367.25],
        }
    ),
]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$", examples=["CAD"])]


# --------------------------------------------------------------------------- payload models


class Payload(BaseModel):
    """The base of every payload model: camelCase JSON names, no unknown fields, frozen."""

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


class _Named(Payload):
    id: PlatformId = Field(description="The platform's identifier.")
    name: Label = Field(description="The name shown to people.")


class ProgramRef(_Named):
    """The program an event concerns."""

    type: ProgramType = Field(description="The kind of program.")


# The mark of a field that holds a person's data (DESIGN §9): erasure, payload retention and
# the OpenAPI description all read it (``personal_data``).
PERSONAL = "x-personal"


class MemberRef(Payload):
    """A person: only a name and an email, never more; both erased at the member's request."""

    id: PlatformId = Field(description="The platform's identifier of the member.")
    name: Label = Field(
        description="The member's name (personal data).", json_schema_extra={PERSONAL: True}
    )
    email: Email = Field(
        description="The member's email address (personal data).",
        json_schema_extra={PERSONAL: True},
    )


class MemberInfo(MemberRef):
    """A member record as far as events show it."""

    status: MemberStatus = Field(description="active, inactive, or pending (not yet approved).")


class EnrollmentInfo(Payload):
    """A registration of a member in a program."""

    id: PlatformId = Field(description="The platform's identifier of the enrollment.")
    status: EnrollmentStatus = Field(
        description="active (the usual case), pending_payment, or waitlisted."
    )
    channel: EnrollmentChannel = Field(
        description="How it came about: storefront checkout, a payment webhook, or staff (proxy)."
    )
    created_at: Timestamp = Field(description="When the registration was made.")


class InvoiceRef(Payload):
    """A reference to an invoice."""

    id: PlatformId = Field(description="The platform's identifier of the invoice.")
    number: Label = Field(description="The invoice number printed on it.")


class InvoiceInfo(InvoiceRef):
    """An invoice with its total and status."""

    total: Money = Field(description="The invoice total, taxes included.")
    status: InvoiceStatus = Field(description="open, partially_paid, paid, or void.")


class PaymentInfo(Payload):
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


class GameInfo(Payload):
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


class Side(Payload):
    """One team in a game, with its score and result once entered."""

    team: TeamRef = Field(description="The team.")
    score: Score | None = Field(
        default=None, description="Points scored; null until a result is entered."
    )
    result: SideResult | None = Field(
        default=None, description="win, loss, or tie; null until a result is entered."
    )


class ReservationInfo(Payload):
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


class BookingInfo(Payload):
    """Who booked, and when."""

    id: PlatformId = Field(description="The platform's identifier of the booking.")
    booked_by: BookedBy = Field(description="member (the curler) or staff (for the curler).")
    created_at: Timestamp = Field(description="When the booking was made.")


class RegistrationCreatedData(Payload):
    """The `data` of a `registration.created` event."""

    enrollment: EnrollmentInfo = Field(description="The registration.")
    program: ProgramRef = Field(description="The program registered for.")
    member: MemberRef = Field(description="The registrant.")
    invoice: InvoiceInfo | None = Field(
        default=None, description="The invoice raised, or null when there is none."
    )


class PaymentCompletedData(Payload):
    """The `data` of a `payment.completed` event."""

    payment: PaymentInfo = Field(description="The payment.")
    invoice: InvoiceRef = Field(description="The invoice it pays.")


class GameUpdatedData(Payload):
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


class MemberUpdatedData(Payload):
    """The `data` of a `member.updated` event."""

    member: MemberInfo = Field(description="The member as it now stands.")
    change: MemberChange = Field(description="created or updated.")


class PracticeIceBookedData(Payload):
    """The `data` of a `practice_ice.booked` event."""

    reservation: ReservationInfo = Field(description="The ice reserved.")
    booking: BookingInfo = Field(description="The booking.")
    member: MemberRef = Field(description="The curler the ice is for.")


class PingData(Payload):
    """The `data` of a `ping` event."""

    message: text.StorableText = Field(
        min_length=1, max_length=1000, description="A human-readable note."
    )
