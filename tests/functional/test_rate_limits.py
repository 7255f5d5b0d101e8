"""The club data API's rate limits (ADR 0009): per key, and per client address for failed
authentications; told in every answer; held together by real server processes."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from httpx2 import Response
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services.rate_limits import SHARE_EVERY
from clubwire.settings import Settings
from clubwire.web.app import create_app
from tests import conftest
from tests.factories import FakeClock, make_club, make_key
from tests.functional import processes

URL = "/clubs/granite/api/v1/programs"
FIELD = re.compile(r'"(?P<policy>[a-z-]+)";r=(?P<remaining>\d+);t=(?P<reset>\d+)')


@pytest.fixture
def keys(sessions: sessionmaker[Session]) -> tuple[str, str, str]:
    """Two keys of granite (one without the programs scope) and one of marble."""
    with sessions.begin() as session:
        granite, marble = make_club(session, "granite"), make_club(session, "marble")
        _, first = make_key(session, granite)
        _, scopeless = make_key(session, granite, ("read:games",))
        _, other = make_key(session, marble)
        return first, scopeless, other


@contextmanager
def _client(settings: Settings, clock: FakeClock, **limits: int) -> Iterator[TestClient]:
    limited = conftest.make_settings(settings.database_url, settings.home, **limits)
    with TestClient(create_app(limited, clock), raise_server_exceptions=False) as client:
        yield client


def _get(client: TestClient, key: str | None, url: str = URL, **headers: str) -> Response:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return client.get(url, headers=headers)


def _standing(response: Response) -> tuple[str, int]:
    """The policy an answer was counted under, and what remains of it."""
    found = FIELD.fullmatch(response.headers["ratelimit"])
    assert found is not None, response.headers["ratelimit"]
    assert 1 <= int(found["reset"]) <= 60
    return found["policy"], int(found["remaining"])


def test_every_answer_for_a_key_tells_what_remains_of_its_minute(
    settings: Settings, clock: FakeClock, keys: tuple[str, str, str]
) -> None:
    key, scopeless, _ = keys
    with _client(settings, clock, api_rate_limit=5) as client:
        first = _get(client, key)
        assert first.headers["ratelimit-policy"] == '"per-key";q=5;w=60'
        assert _standing(first) == ("per-key", 4)
        unchanged = _get(client, key, **{"If-None-Match": first.headers["etag"]})
        assert unchanged.status_code == 304
        assert _standing(unchanged) == ("per-key", 3)
        refused = _get(client, scopeless)
        assert refused.status_code == 403
        assert _standing(refused) == ("per-key", 4)  # its own key's count


def test_past_its_limit_a_key_gets_429_until_the_minute_ends_and_no_other_key_is_slowed(
    settings: Settings, clock: FakeClock, keys: tuple[str, str, str]
) -> None:
    key, _, other = keys
    with _client(settings, clock, api_rate_limit=3) as client:
        assert [_get(client, key).status_code for _ in range(3)] == [200, 200, 200]
        refused = _get(client, key)
        assert refused.status_code == 429
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["code"] == "rate_limited"
        assert "3 requests for this minute" in refused.json()["detail"]
        assert int(refused.headers["retry-after"]) == _reset(refused)
        assert _get(client, other, URL.replace("granite", "marble")).status_code == 200


def _reset(response: Response) -> int:
    found = FIELD.fullmatch(response.headers["ratelimit"])
    assert found is not None
    return int(found["reset"])


def test_failed_authentications_from_an_address_are_slowed_even_with_a_good_key(
    settings: Settings, clock: FakeClock, keys: tuple[str, str, str]
) -> None:
    key, _, _ = keys
    with _client(settings, clock, api_auth_failure_limit=3) as client:
        guesses = [_get(client, "cw_live_aaaaaaaaaa_" + "b" * 32) for _ in range(3)]
        assert [g.status_code for g in guesses] == [401, 401, 401]
        assert [_standing(g) for g in guesses] == [("auth-failures", n) for n in (2, 1, 0)]
        assert guesses[0].headers["ratelimit-policy"] == '"auth-failures";q=3;w=60'
        slowed = _get(client, key)
        assert slowed.status_code == 429
        assert "failed to authenticate" in slowed.json()["detail"]
        assert int(slowed.headers["retry-after"]) == _reset(slowed)


def test_a_limit_of_zero_is_off_and_tells_nothing(
    settings: Settings, clock: FakeClock, keys: tuple[str, str, str]
) -> None:
    key, _, _ = keys
    with _client(settings, clock, api_rate_limit=0, api_auth_failure_limit=0) as client:
        answers = [_get(client, key) for _ in range(5)] + [_get(client, None) for _ in range(5)]
        assert [a.status_code for a in answers] == [200] * 5 + [401] * 5
        assert not any("ratelimit" in a.headers for a in answers)


# -- real server processes ---------------------------------------------------------------------


def test_two_server_processes_hold_one_limit_together(
    settings: Settings, keys: tuple[str, str, str], tmp_path: Path
) -> None:
    """Eight requests on one process, then, once they have shared their counts (about a
    second), the other lets only the last two of ten through, and then neither does. (Near
    the end of a minute the window would turn in between: the test waits for the next.)"""
    if settings.is_sqlite:
        pytest.skip("several server processes share one limit on PostgreSQL")
    key, _, _ = keys
    with ExitStack() as stack:
        first, second = processes.servers(
            stack, settings, tmp_path, 2, CLUBWIRE_API_RATE_LIMIT="10"
        )
        if time.time() % 60 > 45:
            time.sleep(61 - time.time() % 60)
        assert [processes.fetch(first, key) for _ in range(8)] == [200] * 8
        time.sleep(3 * SHARE_EVERY)
        assert processes.fetch(second, key) == 200  # a key it has not seen: it learns its count now
        time.sleep(3 * SHARE_EVERY)
        assert [processes.fetch(second, key) for _ in range(2)] == [200, 429]
        time.sleep(3 * SHARE_EVERY)
        assert processes.fetch(first, key) == 429


def test_behind_a_trusted_proxy_the_forwarded_address_is_the_client(
    settings: Settings, keys: tuple[str, str, str], tmp_path: Path
) -> None:
    """Failed authentications count against the address X-Forwarded-For names when the peer
    is a trusted proxy; from anywhere else the header is not believed."""
    key, _, _ = keys
    bad = "cw_live_aaaaaaaaaa_" + "b" * 32
    with ExitStack() as stack:
        (trusting,) = processes.servers(
            stack,
            settings,
            tmp_path / "trusting",
            1,
            CLUBWIRE_API_AUTH_FAILURE_LIMIT="2",
            CLUBWIRE_TRUSTED_PROXIES="127.0.0.1",
        )
        (plain,) = processes.servers(
            stack, settings, tmp_path / "plain", 1, CLUBWIRE_API_AUTH_FAILURE_LIMIT="2"
        )
        guesser, visitor = {"X-Forwarded-For": "203.0.113.7"}, {"X-Forwarded-For": "198.51.100.1"}
        assert [processes.fetch(trusting, bad, **guesser) for _ in range(3)] == [401, 401, 429]
        assert processes.fetch(trusting, key, **guesser) == 429
        assert processes.fetch(trusting, key, **visitor) == 200  # another client behind the proxy
        assert [processes.fetch(plain, bad, **guesser) for _ in range(2)] == [401, 401]
        assert processes.fetch(plain, key, **visitor) == 429  # one peer, whatever the header says
