"""Which of an endpoint's finished deliveries a replay sends again: a window of time, to the
minute, and the statuses and event kinds chosen, read from what people type (issue 14).

The window is half-open, ``since`` ≤ created < ``until``, so that consecutive windows
(10:00–11:00, 11:00–12:00) never replay a delivery twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from clubwire import errors
from clubwire.domain import event_catalog, text
from clubwire.domain.delivering import Status

# What may be replayed: finished deliveries (a pending one is still on its way).
STATUSES: tuple[Status, ...] = (Status.DEAD, Status.SKIPPED, Status.SUCCEEDED)
DEFAULT_STATUSES: tuple[Status, ...] = (Status.DEAD, Status.SKIPPED)
EXAMPLE_TIME = "2026-01-05T12:00Z"
EXAMPLE_OFFSET = "2026-01-05T13:00+01:00"  # the same minute, converted to UTC
# A time to the minute: the date (years 1000 to 2999), T, hours and minutes, zero seconds if
# any, and Z or an offset (none: UTC). What ``datetime.fromisoformat`` reads of it is what it says.
MINUTE_PATTERN = (
    r"^[12][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]"
    r"(:00(\.0{1,6})?)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?$"
)
_MINUTE = re.compile(MINUTE_PATTERN)


@dataclass(frozen=True, slots=True)
class Window:
    """The deliveries created from ``since`` (inclusive) to ``until`` (exclusive), in one of
    ``statuses``, of one of ``kinds`` (empty: every kind)."""

    since: datetime
    until: datetime
    statuses: tuple[Status, ...] = DEFAULT_STATUSES
    kinds: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Replay:
    """How many deliveries a replay sends (``count``, at most the limit) of the ``matching``
    ones in its window."""

    count: int
    matching: int
    withheld: int = 0  # finished deliveries of the window whose payload was erased or expired

    @property
    def capped(self) -> bool:
        """The window holds more than one replay sends: replay again after for the rest."""
        return self.matching > self.count

    def describe(self) -> dict[str, object]:
        return {
            "count": self.count,
            "matching": self.matching,
            "capped": self.capped,
            "withheld": self.withheld,
        }

    def summary(self, preview: bool) -> str:
        """The outcome in a sentence, for people (the preview's, or the replay's)."""
        kept = self._said(preview)
        if not self.withheld:
            return kept
        noun = "delivery" if self.withheld == 1 else "deliveries"
        return (
            f"{kept} {self.withheld:,} {noun} of this window cannot be sent again: their payload "
            "was erased at a member's request or has expired."
        )

    def _said(self, preview: bool) -> str:
        if not self.matching:
            return "No delivery in this window can be replayed."
        shown = f"{self.count:,} of {self.matching:,}" if self.capped else f"{self.count:,}"
        noun = "delivery" if self.matching == 1 else "deliveries"
        if preview:
            said = f"{shown} {noun} will be replayed"
            rest = "narrow the window or replay again after"
        else:
            said = f"Replayed {shown} {noun}"
            rest = "replay again for the rest"
        return f"{said}; {rest}." if self.capped else f"{said}."


def window(
    since: str, until: str, statuses: Iterable[str] = (), kinds: Iterable[str] = ()
) -> Window:
    """The window as given; InvalidInput saying what is wrong."""
    start, end = minute(since, "since"), minute(until, "until")
    if start >= end:
        raise errors.InvalidInput("since must be before until (the window is [since, until)).")
    return Window(start, end, chosen_statuses(statuses), chosen_kinds(kinds))


def minute(value: str, what: str) -> datetime:
    """A time to the minute as ``MINUTE_PATTERN`` says, in UTC (without an offset: UTC;
    another offset is converted)."""
    why = text.refusal(value)
    if why is not None:
        raise errors.InvalidInput(f"{what} {why}.")
    try:
        if _MINUTE.fullmatch(value) is None:
            raise ValueError(value)
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):  # no such day (02-30), or beyond the years 1 to 9999
        raise errors.InvalidInput(
            f"{what} must be a time to the minute, like {EXAMPLE_TIME} or {EXAMPLE_OFFSET} "
            "(UTC unless an offset is given; seconds, if given, :00)."
        ) from None


def chosen_statuses(given: Iterable[str]) -> tuple[Status, ...]:
    """The statuses chosen, in a fixed order; none chosen: dead and skipped."""
    chosen = set(given)
    unknown = sorted(chosen - set(STATUSES))
    if unknown:
        names = ", ".join(STATUSES)
        raise errors.InvalidInput(
            f"{_quoted(unknown[0])} is not a status a replay can choose: choose from {names}."
        )
    return tuple(status for status in STATUSES if status in chosen) or DEFAULT_STATUSES


def chosen_kinds(given: Iterable[str]) -> tuple[str, ...]:
    """The event kinds chosen, in catalogue order; none chosen: every kind."""
    chosen = set(given)
    unknown = sorted(chosen - set(event_catalog.SUBSCRIBABLE))
    if unknown:
        raise errors.InvalidInput(
            f"{_quoted(unknown[0])} is not an event kind that can be replayed: choose from "
            f"{', '.join(event_catalog.SUBSCRIBABLE)}."
        )
    return tuple(kind for kind in event_catalog.SUBSCRIBABLE if kind in chosen)


def _quoted(value: str) -> str:
    """Someone's input inside our message: cleaned, short, quoted."""
    return f'"{text.cleaned(value, 40)}"'


def to_minute(moment: datetime) -> str:
    """A time as a window bound is written: ``2026-01-05T12:00Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")
