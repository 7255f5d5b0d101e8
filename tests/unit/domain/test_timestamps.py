"""Unit tests for the one wire format of timestamps: ``2026-01-13T18:30:00.000Z``."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import timestamps

WIRE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

# Offsets strictly inside ±24h, down to the microsecond, as ``timezone`` allows.
offsets = st.timedeltas(
    min_value=timedelta(hours=-23, minutes=-59, seconds=-59),
    max_value=timedelta(hours=23, minutes=59, seconds=59),
).map(timezone)
# One day of margin at each end, so that the UTC moment is still in years 1000..9999.
aware_moments = st.datetimes(
    min_value=datetime(1000, 1, 2),
    max_value=datetime(9999, 12, 30, 23, 59, 59, 999_999),
    timezones=offsets,
)


def test_to_wire_formats_utc_with_milliseconds_and_z() -> None:
    moment = datetime(2026, 1, 13, 18, 30, tzinfo=UTC)
    assert timestamps.to_wire(moment) == "2026-01-13T18:30:00.000Z"


def test_to_wire_keeps_milliseconds() -> None:
    moment = datetime(2026, 1, 13, 18, 30, 5, 7_000, tzinfo=UTC)
    assert timestamps.to_wire(moment) == "2026-01-13T18:30:05.007Z"


def test_to_wire_truncates_microseconds_rather_than_rounding() -> None:
    moment = datetime(2026, 1, 13, 18, 30, 59, 999_999, tzinfo=UTC)
    assert timestamps.to_wire(moment) == "2026-01-13T18:30:59.999Z"


def test_to_wire_converts_a_negative_offset_to_utc() -> None:
    moment = datetime(2026, 1, 13, 13, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert timestamps.to_wire(moment) == "2026-01-13T18:30:00.000Z"


def test_to_wire_converts_a_positive_offset_across_midnight() -> None:
    moment = datetime(2026, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    assert timestamps.to_wire(moment) == "2025-12-31T20:30:00.000Z"


def test_to_wire_zero_pads_every_field() -> None:
    moment = datetime(2026, 2, 3, 4, 5, 6, 7_000, tzinfo=UTC)
    assert timestamps.to_wire(moment) == "2026-02-03T04:05:06.007Z"


def test_to_wire_zero_pads_years_before_1000() -> None:
    """RFC 3339 years are four digits; glibc's ``%Y`` does not pad (see the report)."""
    moment = datetime(999, 12, 31, 23, 30, tzinfo=UTC)
    assert timestamps.to_wire(moment) == "0999-12-31T23:30:00.000Z"


@given(aware_moments)
def test_to_wire_always_has_the_wire_shape(moment: datetime) -> None:
    assert WIRE.match(timestamps.to_wire(moment))


@given(aware_moments)
def test_to_wire_denotes_the_same_moment_to_the_millisecond(moment: datetime) -> None:
    parsed = datetime.fromisoformat(timestamps.to_wire(moment))
    difference = moment - parsed
    assert parsed.utcoffset() == timedelta(0)
    assert timedelta(0) <= difference < timedelta(milliseconds=1)


def test_utc_now_is_aware_and_in_utc() -> None:
    now = timestamps.utc_now()
    assert now.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - now) < timedelta(seconds=5)
