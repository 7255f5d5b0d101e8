"""A replay's window and filter, read from what people type, and its outcome in words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire import errors
from clubwire.domain import replay_window
from clubwire.domain.delivering import Status
from clubwire.domain.replay_window import Replay

NOON = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "written",
    [
        "2026-01-05T12:00Z",
        "2026-01-05T12:00",
        "2026-01-05T12:00:00Z",
        "2026-01-05T12:00:00.000Z",
        "2026-01-05T13:00+01:00",
        "2026-01-05T11:30-00:30",
    ],
)
def test_a_minute_is_read_in_utc(written: str) -> None:
    assert replay_window.minute(written, "since") == NOON


@pytest.mark.parametrize(
    "written",
    [
        "2026-01-05T12:00:30Z",  # seconds
        "2026-01-05T12:00:00.5Z",
        "2026-01-05",  # no time
        "2026-02-30T12:00Z",  # no such day
        "2026-01-05T24:00Z",
        "0999-01-05T12:00Z",
        "2026-01-05T12:00Z\n",
        " 2026-01-05T12:00Z",
        "yesterday",
        "",
        "2026-01-05T12:00Z" * 1000,
    ],
)
def test_anything_else_is_refused_with_an_example(written: str) -> None:
    with pytest.raises(errors.InvalidInput, match="to the minute, like 2026-01-05T12:00Z"):
        replay_window.minute(written, "since")


def test_a_nul_is_refused_as_such() -> None:
    with pytest.raises(errors.InvalidInput, match="NUL"):
        replay_window.minute("2026-01-05T12:00\x00Z", "until")


@given(st.datetimes(datetime(1000, 1, 2), datetime(2999, 12, 30), timezones=st.just(UTC)))
def test_every_minute_written_as_a_bound_reads_back(moment: datetime) -> None:
    minute = moment.replace(second=0, microsecond=0)
    assert replay_window.minute(replay_window.to_minute(minute), "since") == minute


def test_the_window_is_half_open_and_must_not_be_empty() -> None:
    window = replay_window.window("2026-01-05T12:00Z", "2026-01-05T12:01Z")
    assert (window.since, window.until) == (NOON, NOON + timedelta(minutes=1))
    with pytest.raises(errors.InvalidInput, match="since must be before until"):
        replay_window.window("2026-01-05T12:00Z", "2026-01-05T13:00+01:00")


def test_statuses_default_to_dead_and_skipped_and_keep_their_order() -> None:
    assert replay_window.chosen_statuses([]) == (Status.DEAD, Status.SKIPPED)
    chosen = replay_window.chosen_statuses(["succeeded", "dead", "dead"])
    assert chosen == (Status.DEAD, Status.SUCCEEDED)
    with pytest.raises(errors.InvalidInput, match='"pending" is not a status'):
        replay_window.chosen_statuses(["pending"])


def test_kinds_default_to_all_and_never_take_a_ping() -> None:
    assert replay_window.chosen_kinds([]) == ()
    assert replay_window.chosen_kinds(["game.updated"]) == ("game.updated",)
    with pytest.raises(errors.InvalidInput, match=r'"ping" is not an event kind'):
        replay_window.chosen_kinds(["ping"])
    with pytest.raises(errors.InvalidInput, match=r'"\\x00evil" is not'):
        replay_window.chosen_kinds(["\x00evil"])


@pytest.mark.parametrize(
    ("done", "preview", "said"),
    [
        (Replay(0, 0), True, "No delivery in this window can be replayed."),
        (Replay(1, 1), True, "1 delivery will be replayed."),
        (Replay(5, 5), False, "Replayed 5 deliveries."),
        (
            Replay(10_000, 12_345),
            True,
            "10,000 of 12,345 deliveries will be replayed; narrow the window or replay again "
            "after.",
        ),
        (Replay(2, 3), False, "Replayed 2 of 3 deliveries; replay again for the rest."),
    ],
)
def test_the_outcome_in_words(done: Replay, preview: bool, said: str) -> None:
    assert done.summary(preview) == said
    assert done.capped is (done.matching > done.count)


def test_an_offset_is_converted_not_dropped() -> None:
    east = timezone(timedelta(hours=5, minutes=45))
    assert replay_window.minute("2026-01-05T17:45+05:45", "since") == NOON.astimezone(east)
