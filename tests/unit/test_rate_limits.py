"""Rate-limit windows, the header fields that tell a client where it stands, and the API's
policies together, driven through a counter that never shares (no database)."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import sessionmaker

from clubwire.domain import rate_limits
from clubwire.domain.rate_limits import Policy, Standing, Window
from clubwire.services.club_api.rate_limits import ApiLimits, RateCounter

PER_KEY = Policy("per-key", 600)
PER_CLUB = Policy("per-club", 1800)
START = 1_764_000_000.0  # the start of a window


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


def _limits(per_key: int = 3, per_club: int = 5, auth_failures: int = 2) -> ApiLimits:
    counter = RateCounter(sessionmaker(), lambda: START)  # bound to nothing: never shared here
    return ApiLimits(counter, per_key=per_key, per_club=per_club, auth_failures=auth_failures)


def _let_through(standings: list[Standing]) -> bool:
    return rate_limits.refusing(standings) is None


def _remaining(standings: list[Standing]) -> dict[str, int]:
    return {standing.policy.name: standing.remaining for standing in standings}


def test_a_clubs_keys_together_are_refused_past_the_club_limit_each_under_its_own() -> None:
    limits = _limits(per_key=3, per_club=5)
    taken = [limits.take(prefix, "club_a") for _ in range(2) for prefix in ("k1", "k2", "k3")]
    assert [_let_through(t) for t in taken] == [True] * 5 + [False]
    assert _remaining(taken[-1]) == {"per-key": 2, "per-club": 0}  # k3 made 1 of its 3
    assert _let_through(limits.take("k4", "club_b"))  # another club counts alone


def test_a_request_refused_by_its_clubs_limit_does_not_use_up_its_keys() -> None:
    limits = _limits(per_key=3, per_club=2)
    assert [_let_through(limits.take("k1", "club_a")) for _ in range(5)] == [True, True] + [
        False
    ] * 3
    assert _remaining(limits.take("k1", "club_a")) == {"per-key": 1, "per-club": 0}


def test_a_request_refused_by_its_keys_limit_does_not_use_up_its_clubs() -> None:
    limits = _limits(per_key=2, per_club=5)
    assert [_let_through(limits.take("k1", "club_a")) for _ in range(6)] == [True] * 2 + [False] * 4
    assert [_let_through(limits.take("k2", "club_a")) for _ in range(2)] == [True, True]
    last = limits.take("k3", "club_a")  # the club's 5th: the 4 refused to k1 were not counted
    assert _let_through(last)
    assert _remaining(last) == {"per-key": 1, "per-club": 0}


def test_failed_authentications_count_per_address_and_never_against_a_key_or_club() -> None:
    limits = _limits(per_key=3, per_club=5, auth_failures=2)
    failures = [limits.failed("192.0.2.1") for _ in range(3)]
    assert [[s.over for s in f] for f in failures] == [[False], [False], [True]]
    assert not any(s.over for s in limits.failed("192.0.2.2"))  # another address
    assert _remaining(limits.take("k1", "club_a")) == {"per-key": 2, "per-club": 4}


def test_policies_turned_off_are_neither_counted_nor_told() -> None:
    limits = _limits(per_key=0, per_club=0, auth_failures=0)
    assert limits.take("k1", "club_a") == []
    assert limits.failed("192.0.2.1") == []
    assert [s.policy.name for s in _limits(per_key=0).take("k1", "club_a")] == ["per-club"]
    assert [s.policy.name for s in _limits(per_club=0).take("k1", "club_a")] == ["per-key"]
