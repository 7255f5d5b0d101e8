"""A receiver's ``Retry-After`` read into the time it asks for (``retry_after.asked``):
seconds and the three forms of HTTP-date, capped; anything else asks nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import retry_after

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # a Monday
MOST = timedelta(hours=12)
HOUR_LATER = NOW + timedelta(hours=1)
LAST_DATE = datetime.max.replace(tzinfo=UTC)  # the end of year 9999


def _asked(value: str | None) -> datetime | None:
    return retry_after.asked(value, NOW, MOST)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("120", 120), ("1", 1), ("3600", 3600), ("0120", 120), (" 120\t", 120), ("43200", 43200)],
)
def test_delay_seconds_ask_for_that_long_from_now(value: str, seconds: int) -> None:
    assert _asked(value) == NOW + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "value",
    [
        "Mon, 05 Jan 2026 13:00:00 GMT",  # IMF-fixdate, what senders write
        "Monday, 05-Jan-26 13:00:00 GMT",  # the obsolete RFC 850 form
        "Mon Jan  5 13:00:00 2026",  # the obsolete asctime form
    ],
)
def test_each_form_of_http_date_asks_for_its_time(value: str) -> None:
    assert _asked(value) == HOUR_LATER


def test_an_rfc850_year_more_than_50_years_ahead_is_of_the_century_before() -> None:
    # 77 would be 2077: further ahead than 50 years, so 1977, long past: nothing asked.
    assert _asked("Tuesday, 05-Jan-77 13:00:00 GMT") is None
    assert _asked("Sunday, 05-Jan-76 13:00:00 GMT") == NOW + MOST  # 2076: 50 years ahead
    assert _asked("Tuesday, 05-Jan-27 13:00:00 GMT") == NOW + MOST  # 2027, capped


def test_a_leap_second_is_the_second_after_59() -> None:
    assert _asked("Mon, 05 Jan 2026 12:59:60 GMT") == HOUR_LATER


@pytest.mark.parametrize(
    "value",
    [
        "86400",  # a day
        "99999999999",  # 3,000 years: still a date a calendar holds
        "Tue, 06 Jan 2026 12:00:01 GMT",
        "Fri, 31 Dec 9999 23:59:59 GMT",
    ],
)
def test_more_than_the_most_is_cut_to_the_most(value: str) -> None:
    assert _asked(value) == NOW + MOST


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        " ",
        "0",  # now: nothing to wait for
        "-120",
        "+120",
        "12.5",
        "1e3",
        "120s",
        "0x78",
        "120, 120",  # two headers, joined
        "120,",
        "120 60",
        "Mon, 05 Jan 2026 13:00:00 GMT, Mon, 05 Jan 2026 14:00:00 GMT",
        "１２０",  # fullwidth digits
        "١٢٠",  # Arabic-Indic digits
        "12\u00b2",
        "120\u00e9",
        "\\xff120",  # an undecodable byte, as cleaned text shows it
        "1000000000000",  # 10^12 seconds: past any calendar
        "9" * 100,
        "Mon, 05 Jan 2026 12:00:00 GMT",  # now
        "Mon, 05 Jan 2026 11:00:00 GMT",  # past
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Mon, 30 Feb 2026 13:00:00 GMT",  # no such day
        "Mon, 05 Jan 2026 24:00:00 GMT",
        "Mon, 05 Jan 2026 13:60:00 GMT",
        "Mon, 05 Jan 2026 13:00:61 GMT",
        "Mon, 05 Jan 0000 13:00:00 GMT",
        "mon, 05 jan 2026 13:00:00 gmt",  # the names are case-sensitive
        "Mon, 5 Jan 2026 13:00:00 GMT",
        "Mon, 05 Jan 2026 13:00:00 UTC",
        "Mon, 05 Jan 2026 13:00:00 +0000",
        "Mon, 05 Jan 2026 13:00:00 GMT\n",
        "2026-01-05T13:00:00Z",
        "Mon, 05 Jan 2026 13:00:00",
        "Monday, 05-Jan-2026 13:00:00 GMT",
        "Mon Jan 05 13:00:00 2026 GMT",
        "Mon, ０５ Jan 2026 13:00:00 GMT",
    ],
)
def test_anything_else_asks_nothing(value: str | None) -> None:
    assert _asked(value) is None


def test_no_most_means_nothing_later_than_now() -> None:
    assert retry_after.asked("120", NOW, timedelta()) == NOW


@given(st.text())
def test_no_text_raises(value: str) -> None:
    found = _asked(value)
    assert found is None or NOW < found <= NOW + MOST


@given(st.binary())
def test_no_bytes_raise_as_a_header_decodes_them(raw: bytes) -> None:
    found = _asked(raw.decode("utf-8", errors="surrogateescape"))
    assert found is None or NOW < found <= NOW + MOST


@given(st.integers(min_value=1, max_value=10**15))
def test_any_delay_asks_for_it_capped_or_nothing_past_the_calendar(seconds: int) -> None:
    found = _asked(str(seconds))
    if seconds > (LAST_DATE - NOW).total_seconds():
        assert found is None
    else:
        assert found == NOW + min(timedelta(seconds=seconds), MOST)


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(9999, 12, 31)))
def test_any_imf_fixdate_asks_for_its_time_if_ahead(moment: datetime) -> None:
    moment = moment.replace(microsecond=0, tzinfo=UTC)
    found = _asked(format_datetime(moment, usegmt=True))
    assert found == (min(moment, NOW + MOST) if moment > NOW else None)


@pytest.mark.parametrize(
    ("value", "readable"),
    [
        ("120", True),
        (" 0 ", True),
        ("Mon, 05 Jan 2026 13:00:00 GMT", True),
        ("Monday, 05-Jan-26 13:00:00 GMT", True),
        ("Mon Jan  5 13:00:00 2026", True),
        ("Mon, 30 Feb 2026 13:00:00 GMT", True),  # of the shape, though no such day
        ("ann@example.com", False),
        ("120, 60", False),
        ("Ann O'Neil", False),
        ("١٢٠", False),
        ("", False),
    ],
)
def test_readable_says_whether_a_value_has_the_shape_of_one(value: str, readable: bool) -> None:
    assert retry_after.readable(value) is readable


@given(st.text())
def test_whatever_is_readable_is_ascii_digits_dates_and_blanks(value: str) -> None:
    if retry_after.readable(value):
        assert value.strip(" \t").isascii()
        assert "@" not in value
