"""The API's rate-limit policies together (per key, per club, failed authentications per
address), driven through a counter that never shares (no database; shared through the
database: ``tests/integration/services/club_api/test_rate_counts.py``)."""

from __future__ import annotations

from sqlalchemy.orm import sessionmaker

from clubwire.domain import rate_limits
from clubwire.domain.rate_limits import Standing
from clubwire.services.club_api.rate_limits import ApiLimits, RateCounter

START = 1_764_000_000.0  # the start of a window


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
