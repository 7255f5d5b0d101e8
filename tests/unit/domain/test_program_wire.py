"""Unit tests for program validation and the exact program listing the API serves."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, cast

import orjson
import pytest
from pydantic import ValidationError

from clubwire.domain.program_wire import ProgramData, ProgramStatus, ProgramType, listing_body

WIRE_FIELDS = [
    "id",
    "name",
    "description",
    "type",
    "status",
    "startDate",
    "endDate",
    "price",
    "capacity",
    "createdAt",
    "updatedAt",
]
JAN_13 = datetime(2026, 1, 13, 18, 30, tzinfo=UTC)


def program_json(**overrides: object) -> dict[str, object]:
    """A valid program as the platform sends it, in camelCase."""
    data: dict[str, object] = {
        "name": "Tuesday Night League",
        "description": "Social league, two draws a night.",
        "type": "LEAGUE",
        "status": "ACTIVE",
        "startDate": "2026-01-13T18:30:00.000Z",
        "endDate": "2026-03-31T22:00:00.000Z",
        "price": "325.00",
        "capacity": 48,
    }
    data.update(overrides)
    return data


@dataclasses.dataclass(frozen=True)
class Stored:
    """A stored program as the listing sees it (implements ``StoredProgram``)."""

    id: str = "prg_1"
    name: str = "Tuesday Night League"
    description: str = "Social league."
    type: str = "LEAGUE"
    status: str = "ACTIVE"
    start_date: datetime = JAN_13
    end_date: datetime = JAN_13 + timedelta(days=77)
    price_cents: int = 32500
    capacity: int = 48
    private: bool = False
    created_at: datetime = datetime(2025, 11, 2, 15, 4, 5, tzinfo=UTC)
    updated_at: datetime = datetime(2025, 12, 1, 9, 0, tzinfo=UTC)


def listed(*programs: Stored) -> list[dict[str, Any]]:
    body = cast(dict[str, Any], orjson.loads(listing_body(programs)))
    assert list(body) == ["data"]
    return cast(list[dict[str, Any]], body["data"])


def listed_ids(*programs: Stored) -> list[str]:
    return [entry["id"] for entry in listed(*programs)]


# --- ProgramData ------------------------------------------------------------------------


def test_a_valid_program_is_read_with_its_values() -> None:
    program = ProgramData.model_validate(program_json())
    assert program.name == "Tuesday Night League"
    assert program.type is ProgramType.LEAGUE
    assert program.status is ProgramStatus.ACTIVE
    assert program.start_date == JAN_13
    assert program.end_date == datetime(2026, 3, 31, 22, 0, tzinfo=UTC)
    assert program.price == Decimal("325.00")
    assert program.capacity == 48


def test_optional_fields_have_defaults() -> None:
    data = program_json()
    del data["description"]
    program = ProgramData.model_validate(data)
    assert program.description == ""
    assert program.private is False
    assert program.created_at is None
    assert program.updated_at is None


def test_camel_case_field_names_are_accepted() -> None:
    program = ProgramData.model_validate(
        program_json(
            private=True,
            createdAt="2025-11-02T15:04:05Z",
            updatedAt="2025-12-01T09:00:00Z",
        )
    )
    assert program.private is True
    assert program.created_at == datetime(2025, 11, 2, 15, 4, 5, tzinfo=UTC)
    assert program.updated_at == datetime(2025, 12, 1, 9, 0, tzinfo=UTC)


def test_snake_case_field_names_are_accepted_too() -> None:
    data = program_json()
    data["start_date"] = data.pop("startDate")
    data["end_date"] = data.pop("endDate")
    assert ProgramData.model_validate(data).start_date == JAN_13


@pytest.mark.parametrize("field", ["startDate", "endDate", "createdAt", "updatedAt"])
def test_naive_datetimes_are_rejected(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        ProgramData.model_validate(program_json(**{field: "2026-02-01T18:30:00"}))


def test_end_before_start_is_rejected() -> None:
    with pytest.raises(ValidationError, match="endDate must not be before startDate"):
        ProgramData.model_validate(
            program_json(startDate="2026-01-13T18:30:00Z", endDate="2026-01-13T18:29:59.999Z")
        )


def test_end_equal_to_start_is_accepted() -> None:
    program = ProgramData.model_validate(
        program_json(startDate="2026-01-13T18:30:00Z", endDate="2026-01-13T18:30:00Z")
    )
    assert program.end_date == program.start_date


def test_start_and_end_are_compared_as_moments_not_wall_clock_times() -> None:
    program = ProgramData.model_validate(
        program_json(startDate="2026-01-13T20:00:00Z", endDate="2026-01-13T18:00:00-05:00")
    )
    assert program.end_date - program.start_date == timedelta(hours=3)
    with pytest.raises(ValidationError, match="endDate"):
        ProgramData.model_validate(
            program_json(startDate="2026-01-13T20:00:00Z", endDate="2026-01-13T22:00:00+05:00")
        )


@pytest.mark.parametrize(
    "price",
    [
        pytest.param("-0.01", id="negative"),
        pytest.param(-1, id="negative-int"),
        pytest.param("19.999", id="three-decimals"),
        pytest.param("0.001", id="tenth-of-a-cent"),
        pytest.param("NaN", id="nan-text"),
        pytest.param("Infinity", id="infinity-text"),
        pytest.param("-Infinity", id="negative-infinity-text"),
        pytest.param(float("nan"), id="nan-float"),
        pytest.param(float("inf"), id="inf-float"),
        pytest.param("100000000.00", id="too-many-digits"),
        pytest.param("", id="empty"),
        pytest.param("12 dollars", id="text"),
    ],
)
def test_invalid_prices_are_rejected(price: object) -> None:
    with pytest.raises(ValidationError, match="price"):
        ProgramData.model_validate(program_json(price=price))


@pytest.mark.parametrize("capacity", [-1, 1_000_001, "many", 1.5])
def test_invalid_capacities_are_rejected(capacity: object) -> None:
    with pytest.raises(ValidationError, match="capacity"):
        ProgramData.model_validate(program_json(capacity=capacity))


def test_zero_capacity_and_zero_price_are_accepted() -> None:
    program = ProgramData.model_validate(program_json(capacity=0, price="0"))
    assert program.capacity == 0
    assert program.price_cents == 0


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="colour"):
        ProgramData.model_validate(program_json(colour="red"))


def test_an_id_is_not_part_of_program_data() -> None:
    with pytest.raises(ValidationError, match="id"):
        ProgramData.model_validate(program_json(id="prg_1"))


@pytest.mark.parametrize("value", ["SOCIAL", "league", "", "Learn to curl"])
def test_unknown_types_are_rejected(value: str) -> None:
    with pytest.raises(ValidationError, match="type"):
        ProgramData.model_validate(program_json(type=value))


@pytest.mark.parametrize("value", ["OPEN", "active", "", "DELETED"])
def test_unknown_statuses_are_rejected(value: str) -> None:
    with pytest.raises(ValidationError, match="status"):
        ProgramData.model_validate(program_json(status=value))


@pytest.mark.parametrize("field", ["name", "type", "status", "startDate", "endDate", "price"])
def test_required_fields_are_required(field: str) -> None:
    data = program_json()
    del data[field]
    with pytest.raises(ValidationError, match=field):
        ProgramData.model_validate(data)


def test_an_empty_name_is_rejected() -> None:
    with pytest.raises(ValidationError, match="name"):
        ProgramData.model_validate(program_json(name=""))


@pytest.mark.parametrize(
    ("price", "cents"),
    [
        ("19.99", 1999),
        ("325.5", 32550),
        ("325.00", 32500),
        ("0", 0),
        ("0.01", 1),
        ("0.29", 29),
        ("99999999.99", 9_999_999_999),
        (19.99, 1999),
        (7, 700),
    ],
)
def test_price_cents_is_exact(price: object, cents: int) -> None:
    assert ProgramData.model_validate(program_json(price=price)).price_cents == cents


# --- listing_body -----------------------------------------------------------------------


def test_an_empty_listing_is_an_empty_data_array() -> None:
    assert listing_body([]) == b'{"data":[]}'


def test_the_listing_shows_an_active_public_program_with_exactly_the_wire_fields() -> None:
    [entry] = listed(Stored())
    assert list(entry) == WIRE_FIELDS
    assert entry == {
        "id": "prg_1",
        "name": "Tuesday Night League",
        "description": "Social league.",
        "type": "LEAGUE",
        "status": "ACTIVE",
        "startDate": "2026-01-13T18:30:00.000Z",
        "endDate": "2026-03-31T18:30:00.000Z",
        "price": 325.0,
        "capacity": 48,
        "createdAt": "2025-11-02T15:04:05.000Z",
        "updatedAt": "2025-12-01T09:00:00.000Z",
    }


@pytest.mark.parametrize("status", [s for s in ProgramStatus if s is not ProgramStatus.ACTIVE])
def test_the_listing_leaves_out_programs_that_are_not_active(status: ProgramStatus) -> None:
    assert listed_ids(Stored(id="shown"), Stored(id="hidden", status=status)) == ["shown"]


def test_the_listing_leaves_out_private_programs() -> None:
    assert listed_ids(Stored(id="shown"), Stored(id="hidden", private=True)) == ["shown"]


def test_the_listing_leaves_out_private_programs_even_when_active() -> None:
    assert listed(Stored(private=True, status="ACTIVE")) == []


def test_the_listing_accepts_status_enums_as_well_as_strings() -> None:
    assert listed_ids(Stored(status=ProgramStatus.ACTIVE, type=ProgramType.CAMP)) == ["prg_1"]


def test_the_listing_is_ordered_by_start_date_first() -> None:
    programs = [
        Stored(id="c", name="A", start_date=JAN_13 + timedelta(days=2)),
        Stored(id="a", name="C", start_date=JAN_13),
        Stored(id="b", name="B", start_date=JAN_13 + timedelta(days=1)),
    ]
    assert listed_ids(*programs) == ["a", "b", "c"]


def test_the_listing_compares_start_dates_as_moments_across_offsets() -> None:
    eastern = timezone(timedelta(hours=-5))
    earlier_wall_clock_but_later = datetime(2026, 1, 13, 15, 0, tzinfo=eastern)
    programs = [
        Stored(id="later", start_date=earlier_wall_clock_but_later),  # 20:00Z
        Stored(id="earlier", start_date=datetime(2026, 1, 13, 19, 0, tzinfo=UTC)),
    ]
    assert listed_ids(*programs) == ["earlier", "later"]


def test_the_listing_breaks_start_date_ties_by_name() -> None:
    programs = [
        Stored(id="p1", name="Learn to Curl"),
        Stored(id="p2", name="Bonspiel"),
        Stored(id="p3", name="Drop-in"),
    ]
    assert listed_ids(*programs) == ["p2", "p3", "p1"]


def test_the_listing_breaks_start_date_and_name_ties_by_id() -> None:
    programs = [
        Stored(id="prg_c", name="League"),
        Stored(id="prg_a", name="League"),
        Stored(id="prg_b", name="League"),
        Stored(id="prg_0", name="Camp"),
        Stored(id="prg_z", name="League", start_date=JAN_13 - timedelta(seconds=1)),
    ]
    assert listed_ids(*programs) == ["prg_z", "prg_0", "prg_a", "prg_b", "prg_c"]


def test_the_listing_order_does_not_depend_on_input_order() -> None:
    programs = [
        Stored(id=f"prg_{i}", name=f"N{i % 2}", start_date=JAN_13 + timedelta(hours=i % 3))
        for i in range(12)
    ]
    assert listing_body(programs) == listing_body(list(reversed(programs)))


def test_the_listing_writes_timestamps_in_utc_with_milliseconds() -> None:
    toronto = timezone(timedelta(hours=-5))
    [entry] = listed(
        Stored(
            start_date=datetime(2026, 1, 13, 13, 30, tzinfo=toronto),
            end_date=datetime(2026, 1, 13, 23, 0, 0, 123_999, tzinfo=toronto),
            created_at=datetime(2025, 11, 2, 16, 4, 5, 5_000, tzinfo=timezone(timedelta(hours=1))),
            updated_at=datetime(2025, 12, 1, 9, 0, tzinfo=UTC),
        )
    )
    assert entry["startDate"] == "2026-01-13T18:30:00.000Z"
    assert entry["endDate"] == "2026-01-14T04:00:00.123Z"
    assert entry["createdAt"] == "2025-11-02T15:04:05.005Z"
    assert entry["updatedAt"] == "2025-12-01T09:00:00.000Z"


@pytest.mark.parametrize(
    ("cents", "json_number"),
    [
        (32550, b"325.5"),
        (1999, b"19.99"),
        (1, b"0.01"),
        (10, b"0.1"),
        (9_999_999_999, b"99999999.99"),
    ],
)
def test_the_listing_writes_the_price_as_a_json_number(cents: int, json_number: bytes) -> None:
    body = listing_body([Stored(price_cents=cents)])
    assert b'"price":' + json_number + b"," in body
    [entry] = listed(Stored(price_cents=cents))
    assert entry["price"] == cents / 100
    assert isinstance(entry["price"], float)


def test_the_listing_writes_a_free_program_price_as_zero() -> None:
    [entry] = listed(Stored(price_cents=0))
    assert entry["price"] == 0


def test_the_listing_keeps_unicode_text_as_is() -> None:
    [entry] = listed(Stored(name="Bonspiel de l'Été", description="Ça glisse ✓"))
    assert entry["name"] == "Bonspiel de l'Été"
    assert entry["description"] == "Ça glisse ✓"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("startDate", "1899-12-31T23:59:59Z"),
        ("endDate", "3000-01-01T00:00:00Z"),
        ("createdAt", "0999-01-01T00:00:00Z"),
        ("updatedAt", "9999-12-31T23:30:00-01:00"),
    ],
)
def test_implausible_years_are_rejected(field: str, value: str) -> None:
    with pytest.raises(ValidationError, match="between the years 1900 and 2999"):
        ProgramData.model_validate(program_json(**{field: value}))
