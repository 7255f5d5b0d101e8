"""Rate-limit windows and the header fields that tell a client where it stands."""

from __future__ import annotations

import pytest

from clubwire.domain.rate_limits import Policy, Standing, Window

PER_KEY = Policy("per-key", 600)


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
