"""A receiver's ``Retry-After`` (RFC 9110 §10.2.3) read into the time it asks the next
attempt to wait until (DESIGN §6, "Receivers steer").

The value is a number of seconds (``120``) or an HTTP-date: the IMF-fixdate that RFC 9110
has senders write (``Sun, 06 Nov 1994 08:49:37 GMT``), or one of the two obsolete forms it
has recipients accept too (``Sunday, 06-Nov-94 08:49:37 GMT``, ``Sun Nov  6 08:49:37 1994``).
Anything else asks nothing: the next attempt keeps to the schedule. That is a value with a
second value or a comma beside it (several headers come joined with commas), a sign, a
fraction, a character that is not ASCII, a date that is not one (``31 Feb``), a time that is
already past, or a delay that no calendar holds (10^12 seconds). What is asked is never
taken beyond ``most`` from now: a receiver cannot park a delivery for a year.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DAYS = "Mon|Tue|Wed|Thu|Fri|Sat|Sun"
_LONG_DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH = f"(?P<month>{'|'.join(_MONTHS)})"
_TIME = "(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
# RFC 9110 §5.6.7, case-sensitive as it says; digits are ASCII digits only.
_IMF_FIXDATE = re.compile(
    f"(?:{_DAYS}), (?P<day>[0-9]{{2}}) {_MONTH} (?P<year>[0-9]{{4}}) {_TIME} GMT"
)
_RFC850_DATE = re.compile(
    f"(?:{_LONG_DAYS}), (?P<day>[0-9]{{2}})-{_MONTH}-(?P<year>[0-9]{{2}}) {_TIME} GMT"
)
_ASCTIME_DATE = re.compile(
    f"(?:{_DAYS}) {_MONTH} (?P<day>[0-9]{{2}}| [0-9]) {_TIME} (?P<year>[0-9]{{4}})"
)
_DATES = (_IMF_FIXDATE, _RFC850_DATE, _ASCTIME_DATE)
# More digits than this (leading zeros aside) is further off than any calendar date.
_MOST_DIGITS = 12
# A two-digit year that would be further ahead than this is of the century before.
_YEARS_AHEAD = 50


def asked(value: str | None, now: datetime, most: timedelta) -> datetime | None:
    """When ``value``, a ``Retry-After`` as the receiver gave it, asks the next attempt to
    wait until, seen ``now``: at most ``most`` after ``now``. None when it asks nothing that
    lies ahead, or is not a valid ``Retry-After``. Never raises, whatever ``value`` holds."""
    if value is None:
        return None
    value = value.strip(" \t")
    if not value.isascii():
        return None
    until = _after_seconds(value, now) if value.isdigit() else _date(value, now)
    if until is None or until <= now:
        return None
    return min(until, now + most)


def readable(value: str) -> bool:
    """Whether ``value`` has the shape of a ``Retry-After`` (delay-seconds, or an HTTP-date in
    one of its forms), whatever it asks: such a value holds digits and the names of days and
    months, and nothing else a receiver could have chosen (such as an echo of what it was
    sent)."""
    value = value.strip(" \t")
    if not value.isascii():
        return False
    return value.isdigit() or any(form.fullmatch(value) for form in _DATES)


def _after_seconds(digits: str, now: datetime) -> datetime | None:
    """``now`` plus the delay-seconds ``digits``; None past any calendar date."""
    meaningful = digits.lstrip("0")
    if len(meaningful) > _MOST_DIGITS:
        return None
    try:
        return now + timedelta(seconds=int(meaningful or "0"))
    except OverflowError:
        return None


def _date(value: str, now: datetime) -> datetime | None:
    """The HTTP-date ``value`` in any of its three forms; None when it is none, or names
    no real moment."""
    for form in _DATES:
        found = form.fullmatch(value)
        if found is not None:
            return _moment(found, now)
    return None


def _moment(found: re.Match[str], now: datetime) -> datetime | None:
    year = int(found["year"])
    if len(found["year"]) == 2:
        year += now.year - now.year % 100
        if year > now.year + _YEARS_AHEAD:
            year -= 100
    second = int(found["second"])  # 60 is a leap second: the one after 59
    if second > 60:
        return None
    month = _MONTHS.index(found["month"]) + 1
    hour, minute = int(found["hour"]), int(found["minute"])
    try:
        start = datetime(year, month, int(found["day"]), hour, minute, tzinfo=UTC)
        return start + timedelta(seconds=second)
    except (ValueError, OverflowError):  # no such day or time (31 Feb, 24:00, year 0)
        return None
