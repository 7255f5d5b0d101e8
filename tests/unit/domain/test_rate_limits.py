"""Rate-limit windows and the header fields that tell a client where it stands (the API's
policies together: ``tests/unit/services/club_api/test_rate_limits.py``)."""

from __future__ import annotations

import pytest

from clubwire.domain import rate_limits
from clubwire.domain.rate_limits import Policy, Standing, Window

PER_KEY = Policy("per-key", 600)
PER_CLUB = Policy("per-club", 1800)


@pytest.mark.parametrize(
    ("seconds", "number", "left"),
    [
        (0.0, 0, 60),
        (59.2, 0, 1),
        (59.999, 0, 1),  # never 0: a client told to wait 0 s would ask again at once
        (60.0, 1, 60),
        (1_764_000_000.5, 29_400_000, 60),
        (1_764_000_041.0, 29_400_000, 19),
    ],
)
def test_windows_are_minutes_of_the_clock_that_every_process_shares(
    seconds: float, number: int, left: int
) -> None:
    assert Window.at(seconds) == Window(number, left)


def test_a_request_within_the_quota_is_told_what_remains() -> None:
    standing = Standing(PER_KEY, used=1, window=Window(7, 42))
    assert not standing.over
    assert standing.headers() == {
        "RateLimit-Policy": '"per-key";q=600;w=60',
        "RateLimit": '"per-key";r=599;t=42',
    }


def test_the_last_request_of_the_quota_is_let_through_with_none_remaining() -> None:
    standing = Standing(PER_KEY, used=600, window=Window(7, 42))
    assert not standing.over
    assert standing.headers()["RateLimit"] == '"per-key";r=0;t=42'


def test_a_request_past_the_quota_is_told_when_to_come_back() -> None:
    standing = Standing(PER_KEY, used=601, window=Window(7, 42))
    assert standing.over
    assert standing.headers() == {
        "RateLimit-Policy": '"per-key";q=600;w=60',
        "RateLimit": '"per-key";r=0;t=42',
        "Retry-After": "42",
    }


def test_a_quota_of_zero_turns_the_policy_off() -> None:
    assert not Policy("per-key", 0).on
    assert Policy("per-key", 1).on


def test_several_policies_are_told_as_lists_in_the_order_given() -> None:
    window = Window(7, 42)
    standings = [Standing(PER_KEY, 1, window), Standing(PER_CLUB, 1200, window)]
    assert rate_limits.headers(standings) == {
        "RateLimit-Policy": '"per-key";q=600;w=60, "per-club";q=1800;w=60',
        "RateLimit": '"per-key";r=599;t=42, "per-club";r=600;t=42',
    }


def test_one_policy_over_its_quota_refuses_and_tells_when_to_come_back() -> None:
    window = Window(7, 42)
    standings = [Standing(PER_KEY, 5, window), Standing(PER_CLUB, 1801, window)]
    assert rate_limits.refusing(standings) == standings[1]
    assert rate_limits.headers(standings)["Retry-After"] == "42"
    assert rate_limits.refusing(standings[:1]) is None
    assert rate_limits.headers([]) == {}


def test_a_request_refused_under_another_policy_is_not_counted_under_this_one() -> None:
    counted = Standing(PER_KEY, 5, Window(7, 42))
    assert counted.uncounted().remaining == counted.remaining + 1
