"""``GET {base_url}/api/v1/programs`` through the whole app: answers, errors, isolation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from httpx2 import Response
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import scopes
from clubwire.services import clubs, keys
from clubwire.storage.models import ApiKey
from tests.factories import EPOCH, FakeClock, make_club, make_key, make_program

URL = "/clubs/granite/api/v1/programs"


@dataclass(frozen=True)
class World:
    key: str
    prefix: str
    marble_key: str


@pytest.fixture
def world(sessions: sessionmaker[Session]) -> World:
    with sessions.begin() as session:
        granite = make_club(session, "granite")
        marble = make_club(session, "marble")
        make_program(session, granite, "league", name="Tuesday Night League")
        make_program(session, granite, "secret", name="Board retreat", private=True)
        make_program(session, granite, "draft", name="Spring draft", status="DRAFT")
        make_program(session, marble, "marble-league", name="Marble League")
        record, value = make_key(session, granite)
        _, marble_value = make_key(session, marble)
        return World(key=value, prefix=record.prefix, marble_key=marble_value)


def _get(client: TestClient, key: str | None, url: str = URL) -> Response:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return client.get(url, headers=headers)


def _problem(response: Response, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, object] = response.json()
    assert body["status"] == status
    assert body["code"] == code
    assert body["type"] == f"urn:clubwire:problem:{code}"
    return body


def test_lists_only_the_clubs_active_public_programs(client: TestClient, world: World) -> None:
    response = client.get(URL, headers={"Authorization": f"Bearer {world.key}"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert [p["id"] for p in response.json()["data"]] == ["league"]


def test_missing_key_is_401_with_a_bare_challenge(client: TestClient, world: World) -> None:
    response = client.get(URL)
    _problem(response, 401, "invalid_token")
    assert response.headers["www-authenticate"] == 'Bearer realm="clubwire"'


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Token cw_live_abcdefghij_0123456789abcdefghijABCDEFGHIJKL",
        "Bearer cw_test_abcdefghij_0123456789abcdefghijABCDEFGHIJKL",
        "Bearer cw_live_abc_0123456789abcdefghijABCDEFGHIJKL",
        "Bearer cw_live_abcdefghij_short",
        "Bearer " + "x" * 10_000,
    ],
)
def test_malformed_authorization_is_401(
    client: TestClient, world: World, authorization: str
) -> None:
    response = client.get(URL, headers={"Authorization": authorization})
    _problem(response, 401, "invalid_token")
    assert response.headers["www-authenticate"].startswith('Bearer realm="clubwire"')


def test_unknown_key_is_401(client: TestClient, world: World) -> None:
    forged = world.key[:-4] + ("AAAA" if not world.key.endswith("AAAA") else "BBBB")
    response = _get(client, forged)
    body = _problem(response, 401, "invalid_token")
    assert body["detail"] == "This API key is not known at this club."
    assert response.headers["www-authenticate"] == 'Bearer realm="clubwire", error="invalid_token"'


def test_another_clubs_key_is_unknown_here(client: TestClient, world: World) -> None:
    _problem(_get(client, world.marble_key), 401, "invalid_token")
    other = client.get(
        "/clubs/marble/api/v1/programs", headers={"Authorization": f"Bearer {world.key}"}
    )
    _problem(other, 401, "invalid_token")


def test_unknown_club_is_401(client: TestClient, world: World) -> None:
    _problem(_get(client, world.key, "/clubs/nowhere/api/v1/programs"), 401, "invalid_token")


def test_a_revoked_key_fails_on_the_very_next_request(
    client: TestClient, world: World, sessions: sessionmaker[Session]
) -> None:
    assert client.get(URL, headers={"Authorization": f"Bearer {world.key}"}).status_code == 200
    with sessions.begin() as session:
        keys.revoke_key(session, clubs.get_club(session, "granite").id, world.prefix, EPOCH)
    body = _problem(_get(client, world.key), 401, "invalid_token")
    assert body["detail"] == "This API key has been revoked."


def test_module_off_is_401_and_on_again_works(
    client: TestClient, world: World, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        clubs.set_webhooks_module(session, "granite", False, EPOCH)
    body = _problem(_get(client, world.key), 401, "invalid_token")
    assert body["detail"] == "Webhooks & API are not enabled for this club."
    with sessions.begin() as session:
        clubs.set_webhooks_module(session, "granite", True, EPOCH)
    assert client.get(URL, headers={"Authorization": f"Bearer {world.key}"}).status_code == 200


def test_missing_scope_is_403_naming_the_scope(
    client: TestClient, world: World, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        _, value = make_key(
            session, clubs.get_club(session, "granite"), ("read:games", "read:members")
        )
    response = client.get(URL, headers={"Authorization": f"Bearer {value}"})
    _problem(response, 403, "insufficient_scope")
    assert response.headers["www-authenticate"] == (
        f'Bearer realm="clubwire", error="insufficient_scope", scope="{scopes.READ_PROGRAMS}"'
    )


def test_a_key_in_the_query_string_is_refused_with_advice(client: TestClient, world: World) -> None:
    body = _problem(client.get(f"{URL}?api_key={world.key}"), 401, "invalid_token")
    assert "Authorization" in str(body["detail"])
    assert "revok" in str(body["detail"])


@hypothesis_settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=st.binary(max_size=300).filter(
        lambda b: b"\r" not in b and b"\n" not in b and b"\x00" not in b
    )
)
def test_no_authorization_value_yields_a_server_error(
    client: TestClient, world: World, value: bytes
) -> None:
    response = client.get(URL, headers={b"Authorization": value.strip()})
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"


def test_a_program_change_is_seen_by_the_next_request(
    client: TestClient, world: World, sessions: sessionmaker[Session]
) -> None:
    headers = {"Authorization": f"Bearer {world.key}"}
    assert [p["name"] for p in client.get(URL, headers=headers).json()["data"]] == [
        "Tuesday Night League"
    ]
    with sessions.begin() as session:
        granite = clubs.get_club(session, "granite")
        make_program(session, granite, "league", name="Tuesday Night League (full)")
        make_program(session, granite, "secret", name="Board retreat", private=False)
    names = [p["name"] for p in client.get(URL, headers=headers).json()["data"]]
    assert names == ["Board retreat", "Tuesday Night League (full)"]


def _last_used(sessions: sessionmaker[Session], prefix: str) -> datetime | None:
    with sessions() as session:
        key = session.query(ApiKey).filter_by(prefix=prefix).one()
        return key.last_used_at


def test_last_used_is_noted_at_most_once_a_minute(
    client: TestClient, world: World, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    headers = {"Authorization": f"Bearer {world.key}"}
    start = clock.now
    client.get(URL, headers=headers)
    assert _last_used(sessions, world.prefix) == start
    clock.advance(seconds=45)
    client.get(URL, headers=headers)
    assert _last_used(sessions, world.prefix) == start
    clock.advance(seconds=20)
    client.get(URL, headers=headers)
    assert _last_used(sessions, world.prefix) == start + timedelta(seconds=65)


def test_unknown_paths_and_methods_answer_problems(client: TestClient, world: World) -> None:
    _problem(client.get("/clubs/granite/api/v1/members"), 404, "not_found")
    _problem(
        client.post(URL, headers={"Authorization": f"Bearer {world.key}"}),
        405,
        "method_not_allowed",
    )
