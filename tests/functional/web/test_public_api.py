"""``GET {base_url}/api/v1/programs`` through the whole app: answers, errors, isolation,
conditional requests, and browsers' preflights refused."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from httpx2 import Response
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import scopes
from clubwire.services import clubs
from clubwire.services.club_api import keys
from clubwire.settings import Settings
from clubwire.storage.models import ApiKey
from clubwire.web import conditional
from clubwire.web.app import create_app
from tests.conftest import make_settings
from tests.factories import EPOCH, FakeClock, make_club, make_key, make_program

URL = "/clubs/granite/api/v1/programs"
# On PostgreSQL a change reaches the app's kept key rows by a notice (ADR 0010): a request
# sent at once after the commit may beat it, under load. It takes 2-5 ms.
NOTICE_WITHIN = 1.0


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


@pytest.fixture
def unthrottled(settings: Settings, tmp_path: Path, clock: FakeClock) -> Iterator[TestClient]:
    """The app without rate limits: for many failed authentications in a row."""
    off = make_settings(settings.database_url, tmp_path, api_auth_failure_limit=0)
    with TestClient(create_app(off, clock), raise_server_exceptions=False) as client:
        yield client


def _seen(
    settings: Settings, request: Callable[[], Response], changed: Callable[[Response], bool]
) -> Response:
    """The answer to the first request that sees a change just committed: on SQLite the
    very next request; on PostgreSQL the first after its notice, within ``NOTICE_WITHIN``."""
    response = request()
    deadline = time.monotonic() + NOTICE_WITHIN
    while not settings.is_sqlite and not changed(response) and time.monotonic() < deadline:
        time.sleep(0.005)
        response = request()
    return response


def _refused(response: Response) -> bool:
    return response.status_code == 401


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
    # The key's prefix with another secret, shaped as keys made before checksums (which
    # are still looked up), so that it is the database that does not know it.
    forged = f"cw_live_{world.prefix}_" + "A" * 32
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


def test_a_revoked_key_fails_on_the_next_request(
    client: TestClient, world: World, sessions: sessionmaker[Session], settings: Settings
) -> None:
    assert client.get(URL, headers={"Authorization": f"Bearer {world.key}"}).status_code == 200
    with sessions.begin() as session:
        keys.revoke_key(session, clubs.get_club(session, "granite").id, world.prefix, EPOCH)
    body = _problem(
        _seen(settings, lambda: _get(client, world.key), _refused), 401, "invalid_token"
    )
    assert body["detail"] == "This API key has been revoked."


def test_module_off_is_401_and_on_again_works(
    client: TestClient, world: World, sessions: sessionmaker[Session], settings: Settings
) -> None:
    with sessions.begin() as session:
        clubs.set_webhooks_module(session, "granite", False, EPOCH)
    answer = _seen(settings, lambda: _get(client, world.key), _refused)
    body = _problem(answer, 401, "invalid_token")
    assert body["detail"] == "Webhooks & API are not enabled for this club."
    with sessions.begin() as session:
        clubs.set_webhooks_module(session, "granite", True, EPOCH)
    answer = _seen(settings, lambda: _get(client, world.key), lambda r: not _refused(r))
    assert answer.status_code == 200


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
    unthrottled: TestClient, world: World, value: bytes
) -> None:
    response = unthrottled.get(URL, headers={b"Authorization": value.strip()})
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"


def test_a_program_change_is_seen_by_the_next_request(
    client: TestClient, world: World, sessions: sessionmaker[Session], settings: Settings
) -> None:
    headers = {"Authorization": f"Bearer {world.key}"}
    assert [p["name"] for p in client.get(URL, headers=headers).json()["data"]] == [
        "Tuesday Night League"
    ]
    with sessions.begin() as session:
        granite = clubs.get_club(session, "granite")
        make_program(session, granite, "league", name="Tuesday Night League (full)")
        make_program(session, granite, "secret", name="Board retreat", private=False)
    answer = _seen(
        settings, lambda: client.get(URL, headers=headers), lambda r: len(r.json()["data"]) == 2
    )
    names = [p["name"] for p in answer.json()["data"]]
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


# ---------------------------------------------------------------------------- conditional


def _conditional(client: TestClient, key: str, *tags: str, method: str = "GET") -> Response:
    headers = [("Authorization", f"Bearer {key}"), *(("If-None-Match", tag) for tag in tags)]
    return client.request(method, URL, headers=headers)


def _tag_of(client: TestClient, world: World) -> str:
    response = _get(client, world.key)
    assert response.status_code == 200
    assert response.headers["cache-control"] == "private, no-cache"
    tag = response.headers["etag"]
    assert re.fullmatch(r'"[0-9a-f]{32}"', tag), tag  # strong: no W/
    return tag


@pytest.mark.parametrize(
    "fields",
    [
        ("{tag}",),
        ("W/{tag}",),
        ('"older", {tag}',),
        ("*",),
        ('"older"', "W/{tag}"),  # two header lines are one list
    ],
)
def test_if_none_match_naming_the_listing_is_304_without_a_body(
    client: TestClient, world: World, fields: tuple[str, ...]
) -> None:
    tag = _tag_of(client, world)
    response = _conditional(client, world.key, *(field.format(tag=tag) for field in fields))
    assert response.status_code == 304
    assert response.content == b""
    assert response.headers["etag"] == tag
    assert response.headers["cache-control"] == "private, no-cache"
    assert "content-type" not in response.headers
    assert "content-length" not in response.headers


def test_head_is_conditional_too(client: TestClient, world: World) -> None:
    tag = _tag_of(client, world)
    assert _conditional(client, world.key, tag, method="HEAD").status_code == 304
    head = _conditional(client, world.key, '"older"', method="HEAD")
    assert (head.status_code, head.headers["etag"]) == (200, tag)


@pytest.mark.parametrize("field", ['"older"', "W/\"older\", 'junk'", "garbage", ""])
def test_a_stale_or_unreadable_tag_gets_the_listing(
    client: TestClient, world: World, field: str
) -> None:
    tag = _tag_of(client, world)
    response = _conditional(client, world.key, field)
    assert response.status_code == 200
    assert response.headers["etag"] == tag
    assert [p["id"] for p in response.json()["data"]] == ["league"]


def test_the_tag_changes_exactly_when_the_listing_does(
    client: TestClient, world: World, sessions: sessionmaker[Session], settings: Settings
) -> None:
    first = _tag_of(client, world)
    with sessions.begin() as session:  # a new version, the same listing: the same tag
        granite = clubs.get_club(session, "granite")
        make_program(session, granite, "secret", name="Retreat", private=True)
    assert _tag_of(client, world) == first
    assert _conditional(client, world.key, first).status_code == 304
    with sessions.begin() as session:
        make_program(session, clubs.get_club(session, "granite"), "league", name="League (full)")
    listed = _seen(settings, lambda: _get(client, world.key), lambda r: r.headers["etag"] != first)
    second = _tag_of(client, world)
    assert listed.headers["etag"] == second != first
    changed = _conditional(client, world.key, first)
    assert (changed.status_code, changed.headers["etag"]) == (200, second)
    assert changed.json()["data"][0]["name"] == "League (full)"
    assert _conditional(client, world.key, second).status_code == 304


def test_every_process_gives_a_listing_the_same_tag(
    client: TestClient, world: World, settings: Settings, clock: FakeClock
) -> None:
    tag = _tag_of(client, world)
    with TestClient(create_app(settings, clock)) as other:
        assert _tag_of(other, world) == tag
        assert _conditional(other, world.key, tag).status_code == 304


def test_each_club_has_its_own_tag(client: TestClient, world: World) -> None:
    tag = _tag_of(client, world)
    marble = client.get(
        "/clubs/marble/api/v1/programs",
        headers={"Authorization": f"Bearer {world.marble_key}", "If-None-Match": tag},
    )
    assert marble.status_code == 200
    assert marble.headers["etag"] != tag


def test_the_tag_is_computed_once_per_listing_not_per_request(
    client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    hashed: list[bytes] = []
    real = conditional.entity_tag

    def counted(body: bytes) -> str:
        hashed.append(body)
        return real(body)

    monkeypatch.setattr(conditional, "entity_tag", counted)
    tag = _tag_of(client, world)
    for _ in range(5):
        assert _conditional(client, world.key, tag).status_code == 304
        assert _get(client, world.key).status_code == 200
    assert len(hashed) == 1


@pytest.mark.parametrize("field", ["*", "{tag}"])
def test_authorization_comes_before_the_condition(
    client: TestClient,
    world: World,
    sessions: sessionmaker[Session],
    settings: Settings,
    field: str,
) -> None:
    tag = _tag_of(client, world)
    condition = {"If-None-Match": field.format(tag=tag)}
    _problem(client.get(URL, headers=condition), 401, "invalid_token")
    bad = {**condition, "Authorization": "Bearer cw_live_abcdefghij_" + "A" * 32}
    _problem(client.get(URL, headers=bad), 401, "invalid_token")
    _problem(_conditional(client, world.marble_key, tag), 401, "invalid_token")
    with sessions.begin() as session:
        granite = clubs.get_club(session, "granite")
        _, games_only = make_key(session, granite, ("read:games",))
        keys.revoke_key(session, granite.id, world.prefix, EPOCH)
    _problem(_conditional(client, games_only, tag), 403, "insufficient_scope")
    answer = _seen(settings, lambda: _conditional(client, world.key, tag), _refused)
    revoked = _problem(answer, 401, "invalid_token")
    assert revoked["detail"] == "This API key has been revoked."


# ---------------------------------------------------------------------------- CORS

PREFLIGHT = {"Origin": "https://granite.example", "Access-Control-Request-Method": "GET"}


def _no_cors_headers(response: Response) -> None:
    assert [name for name in response.headers if name.startswith("access-control-")] == []


@pytest.mark.parametrize(
    "path",
    [URL, "/clubs/granite/api/v1/openapi.json", "/clubs/granite/api/v1/members", "/clubs/x/api/"],
)
def test_a_browser_preflight_is_refused_saying_why(
    client: TestClient, world: World, path: str
) -> None:
    headers = {**PREFLIGHT, "Access-Control-Request-Headers": "authorization"}
    response = client.options(path, headers=headers)
    body = _problem(response, 403, "cors_not_supported")
    assert body["title"] == "Forbidden"
    assert "server-side secret" in str(body["detail"])
    assert "your site's server" in str(body["detail"])
    assert "www-authenticate" not in response.headers
    _no_cors_headers(response)


def test_only_a_preflight_is_refused_so(client: TestClient, world: World) -> None:
    plain = client.options(URL)
    _problem(plain, 405, "method_not_allowed")
    assert plain.headers["allow"] == "GET, HEAD"
    origin_only = client.options(URL, headers={"Origin": "https://granite.example"})
    _problem(origin_only, 405, "method_not_allowed")
    assert client.options("/settings/granite", headers=PREFLIGHT).status_code != 403


def test_no_answer_allows_a_browser_to_read_it(client: TestClient, world: World) -> None:
    origin = {"Origin": "https://granite.example"}
    answered = client.get(URL, headers={**origin, "Authorization": f"Bearer {world.key}"})
    assert answered.status_code == 200
    _no_cors_headers(answered)
    _no_cors_headers(client.get(URL, headers=origin))
    _no_cors_headers(client.get("/clubs/granite/api/v1/openapi.json", headers=origin))


def test_a_preflight_by_host_name_is_refused_too(
    settings: Settings, world: World, tmp_path: Path
) -> None:
    by_host = make_settings(settings.database_url, tmp_path, club_host_suffix=".api.example.com")
    with TestClient(create_app(by_host, FakeClock())) as client:
        host = {"Host": "granite.api.example.com"}
        response = client.options("/api/v1/programs", headers={**PREFLIGHT, **host})
        _problem(response, 403, "cors_not_supported")
        headers = {**host, "Authorization": f"Bearer {world.key}"}
        assert client.get("/api/v1/programs", headers=headers).headers["etag"]
