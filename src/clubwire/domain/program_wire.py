"""Programs (SPEC §2.1): what the platform sends, and what the API shows of them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Protocol, Self

import orjson
from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from clubwire.domain import text, timestamps

ProgramId = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
        description="The platform's identifier: 1–128 letters, digits, '.', '_', ':' or '-'.",
        examples=["prg_2026_tuesday_night_league"],
    ),
]


EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(2999, 12, 31, tzinfo=UTC)


class ProgramType(StrEnum):
    LEAGUE = "LEAGUE"
    BONSPIEL = "BONSPIEL"
    CLINIC = "CLINIC"
    LEARN_TO_CURL = "LEARN_TO_CURL"
    CAMP = "CAMP"
    DROP_IN = "DROP_IN"
    OTHER = "OTHER"


class ProgramStatus(StrEnum):
    DRAFT = "DRAFT"
    ACTIVE = "ACTIVE"
    INACTIVE = "INACTIVE"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    ARCHIVED = "ARCHIVED"


class _CamelModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid"
    )


def json_number(value: object) -> object:
    """A before-validator: a number is a JSON number (``48``, or ``48.0``), not text or a
    boolean, which Pydantic alone would read as one (``"48"``, ``true``)."""
    if isinstance(value, str | bool):
        raise ValueError("must be a number, not text or a boolean")
    return value


def _text(value: object) -> object:
    """A moment is text in JSON; Pydantic alone would read a number as a Unix time."""
    if isinstance(value, str | datetime):
        return value
    raise ValueError("must be an ISO 8601 timestamp with a UTC offset or Z")


# The years 1901–2998, which lie between EARLIEST and LATEST whatever the offset: a JSON Schema
# pattern for timestamps, so that documents promise no more than the checks accept.
PLAUSIBLE_YEAR = r"^(19(0[1-9]|[1-9][0-9])|2([0-8][0-9]{2}|9([0-8][0-9]|9[0-8])))-"
# RFC 3339 with an offset.
Moment = Annotated[
    AwareDatetime,
    BeforeValidator(_text),
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "pattern": PLAUSIBLE_YEAR,
            "examples": ["2026-01-13T18:30:00.000Z"],
        }
    ),
]

# The most a program may cost: its cents fill a 64-bit column (``programs.price_cents``).
MAX_PRICE = Decimal("99999999.99")
# Whole cents up to MAX_PRICE, as a JSON number or a string of digits ("325.00").
Price = Annotated[
    Decimal,
    Field(ge=0, le=MAX_PRICE, max_digits=10, decimal_places=2, allow_inf_nan=False),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0, "maximum": float(MAX_PRICE), "multipleOf": 0.01},
                {"type": "string", "pattern": r"^[0-9]{1,8}(\.[0-9]{1,2})?$"},
            ],
            "examples": ["325.00"],
        }
    ),
]


class ProgramData(_CamelModel):
    """A program as the platform sends it: every field the API shows, plus ``private``."""

    name: Annotated[text.StorableText, Field(min_length=1, max_length=200)]
    description: Annotated[text.StorableText, Field(max_length=10_000)] = ""
    type: ProgramType
    status: ProgramStatus
    start_date: Moment
    end_date: Moment = Field(description="Not before startDate.")
    price: Price
    capacity: Annotated[int, Field(ge=0, le=1_000_000), BeforeValidator(json_number)]
    private: StrictBool = Field(
        default=False, description="Hidden from the storefront, so never shown by the API."
    )
    created_at: Moment | None = Field(
        default=None, description="Defaults to when clubwire first stores the program."
    )
    updated_at: Moment | None = Field(
        default=None, description="Defaults to when clubwire last stores a change."
    )

    @field_validator("start_date", "end_date", "created_at", "updated_at")
    @classmethod
    def _plausible_year(cls, value: datetime | None) -> datetime | None:
        if value is not None and not EARLIEST <= value <= LATEST:
            raise ValueError("must lie between the years 1900 and 2999")
        return value

    @model_validator(mode="after")
    def _ends_after_start(self) -> Self:
        if self.end_date < self.start_date:
            raise ValueError("endDate must not be before startDate")
        return self

    @property
    def price_cents(self) -> int:
        return int(self.price * 100)


class ProgramRecord(ProgramData):
    """One entry of an import file: a program with its id."""

    id: ProgramId


class Program(BaseModel):
    """A program as ``GET /api/v1/programs`` shows it (documentation model)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "prg_tuesday_league",
                    "name": "Tuesday Night League",
                    "description": "Social league, two draws a night.",
                    "type": "LEAGUE",
                    "status": "ACTIVE",
                    "startDate": "2026-01-13T18:30:00.000Z",
                    "endDate": "2026-03-31T22:00:00.000Z",
                    "price": 325.0,
                    "capacity": 48,
                    "createdAt": "2025-11-02T15:04:05.000Z",
                    "updatedAt": "2025-12-01T09:00:00.000Z",
                }
            ]
        }
    )

    id: str
    name: str
    description: str
    type: ProgramType
    status: ProgramStatus
    startDate: Annotated[str, Field(json_schema_extra={"format": "date-time"})]
    endDate: Annotated[str, Field(json_schema_extra={"format": "date-time"})]
    price: Annotated[float, Field(ge=0, le=float(MAX_PRICE))]
    capacity: int
    createdAt: Annotated[str, Field(json_schema_extra={"format": "date-time"})]
    updatedAt: Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class ProgramList(BaseModel):
    """The body of ``GET /api/v1/programs``."""

    data: list[Program]


class StoredProgram(Protocol):
    """What the listing needs of a stored program."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def start_date(self) -> datetime: ...
    @property
    def end_date(self) -> datetime: ...
    @property
    def price_cents(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def private(self) -> bool: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...


def is_public(program: StoredProgram) -> bool:
    """What an anonymous storefront visitor sees: active and not private."""
    return program.status == ProgramStatus.ACTIVE and not program.private


def listing_order(program: StoredProgram) -> tuple[datetime, str, str]:
    return (program.start_date, program.name, program.id)


def to_wire(program: StoredProgram) -> dict[str, object]:
    return {
        "id": program.id,
        "name": program.name,
        "description": program.description,
        "type": program.type,
        "status": program.status,
        "startDate": timestamps.to_wire(program.start_date),
        "endDate": timestamps.to_wire(program.end_date),
        "price": program.price_cents / 100,
        "capacity": program.capacity,
        "createdAt": timestamps.to_wire(program.created_at),
        "updatedAt": timestamps.to_wire(program.updated_at),
    }


def listing_body(programs: Iterable[StoredProgram]) -> bytes:
    """The exact bytes of the API's program list: public ones only, in listing order."""
    public = sorted(filter(is_public, programs), key=listing_order)
    return orjson.dumps({"data": [to_wire(program) for program in public]})
