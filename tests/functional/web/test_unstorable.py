"""Text the database cannot hold (NUL; a lone surrogate) in the APIs: every string of a body,
the Idempotency-Key, a path, a query string, the Host and the Authorization headers. Each is
refused with a precise 4xx, writes nothing and logs no traceback; the same request without
the bad character works. (The settings area and the CLI: ``web/ui/test_unstorable.py`` and
``cli/test_unstorable.py``.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from httpx2 import Response
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog
from clubwire.settings import Settings
from clubwire.web.app import create_app
from tests import json_paths
from tests.conftest import PLATFORM_TOKEN, make_settings
from tests.factories import EPOCH, FakeClock, make_club, make_key, program_data
from tests.functional.unstorable import (
    BAD,
    MARK,
    NUL,
    REFUSED,
    json_with,
    member_update,
    no_traceback,
    rows,
)

AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}
JSON = {**AUTH, "Content-Type": "application/json"}
CLUB = "/internal/v1/clubs/granite"
EVENTS = f"{CLUB}/events"
PATH_REFUSED = "The path must not contain NUL characters (\\u0000)."


def _refused(response: Response, detail_start: str) -> str:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "invalid_input"
    assert body["detail"].startswith(detail_start), body["detail"]
    detail: str = body["detail"]
    return detail


@pytest.fixture
def granite(sessions: sessionmaker[Session]) -> str:
    """The club, module on, with an API key; returns the key."""
    with sessions.begin() as session:
        _, key = make_key(session, make_club(session, "granite"))
    return key


# -- bodies ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD)
def test_a_club_name_is_refused_and_nothing_is_written(
    client: TestClient,
    sessions: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
    bad: str,
) -> None:
    before = rows(sessions)
    refused = client.put(CLUB, content=json_with({"name": f"Gran{MARK}ite"}, bad), headers=JSON)
    assert REFUSED[bad] in _refused(refused, "body.name: ")
    assert rows(sessions) == before
    no_traceback(caplog)
    assert client.put(CLUB, json={"name": "Granite"}, headers=AUTH).status_code == 201


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("field", ["name", "description"])
def test_a_program_text_is_refused_and_nothing_is_written(
    client: TestClient,
    sessions: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
    granite: str,
    field: str,
    bad: str,
) -> None:
    url = f"{CLUB}/programs/tue-league"
    before = rows(sessions)
    body = json_with(program_data(**{field: f"Tuesday {MARK}League"}), bad)
    assert REFUSED[bad] in _refused(client.put(url, content=body, headers=JSON), f"body.{field}: ")
    assert rows(sessions) == before
    no_traceback(caplog)
    assert client.put(url, json=program_data(), headers=AUTH).status_code == 201


def _marked(value: Any, at: json_paths.Path) -> Any:
    """A copy of ``value`` whose string at ``at`` carries ``MARK`` (after its first
    character, so that shape checks reading the start still see the right start)."""
    if not at:
        return f"{value[:1]}{MARK}{value[1:]}"
    if isinstance(value, list):
        return [_marked(item, at[1:]) if i == at[0] else item for i, item in enumerate(value)]
    return {key: _marked(item, at[1:]) if key == at[0] else item for key, item in value.items()}


def _path(at: json_paths.Path) -> str:
    return "data" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in at)


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("kind", event_catalog.SUBSCRIBABLE)
def test_every_string_of_an_event_payload_is_refused_and_nothing_is_written(
    client: TestClient,
    sessions: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
    granite: str,
    kind: str,
    bad: str,
) -> None:
    data = event_catalog.sample(kind, EPOCH)
    leaves = [at for at, value in json_paths.paths(data) if isinstance(value, str)]
    assert len(leaves) >= 5
    before = rows(sessions)
    for at in leaves:
        body = json_with({"event": kind, "data": _marked(data, at)}, bad)
        _refused(client.post(EVENTS, content=body, headers=JSON), f"{_path(at)}: ")
    assert rows(sessions) == before
    no_traceback(caplog)
    assert client.post(EVENTS, json={"event": kind, "data": data}, headers=AUTH).status_code == 201


@pytest.mark.parametrize("bad", BAD)
def test_free_text_of_a_payload_is_refused_with_the_reason(
    client: TestClient, granite: str, bad: str
) -> None:
    body = json_with({"event": "member.updated", "data": member_update(f"Ann {MARK}Lee")}, bad)
    detail = _refused(client.post(EVENTS, content=body, headers=JSON), "data.member.name: ")
    assert detail == f"data.member.name: {REFUSED[bad]}"


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize(
    "body",
    [
        {"event": f"member{MARK}.updated", "data": {}},
        {"event": "member.updated", "data": {f"mem{MARK}ber": {}}},
    ],
    ids=["kind", "data key"],
)
def test_a_kind_or_a_key_of_data_is_refused(
    client: TestClient,
    sessions: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
    granite: str,
    body: dict[str, object],
    bad: str,
) -> None:
    before = rows(sessions)
    _refused(client.post(EVENTS, content=json_with(body, bad), headers=JSON), "")
    assert rows(sessions) == before
    no_traceback(caplog)


@pytest.mark.parametrize("bad", BAD)
def test_the_module_switch_refuses_text(client: TestClient, granite: str, bad: str) -> None:
    url = f"{CLUB}/modules/webhooks"
    body = json_with({"enabled": f"t{MARK}rue"}, bad)
    _refused(client.put(url, content=body, headers=JSON), "body.enabled: ")
    assert client.put(url, json={"enabled": True}, headers=AUTH).status_code == 200


def test_an_idempotency_key_is_refused_and_nothing_is_written(
    client: TestClient,
    sessions: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
    granite: str,
) -> None:
    """A header is read as Latin-1, so NUL is all it can carry that the database cannot hold."""
    body = {"event": "member.updated", "data": event_catalog.sample("member.updated", EPOCH)}
    before = rows(sessions)
    refused = client.post(EVENTS, json=body, headers={**AUTH, "Idempotency-Key": f"key{NUL}one"})
    _refused(refused, "An idempotency key has 1–255 printable characters.")
    assert rows(sessions) == before
    no_traceback(caplog)
    headers = {**AUTH, "Idempotency-Key": "key-one"}
    assert client.post(EVENTS, json=body, headers=headers).status_code == 201


# -- paths, query strings, headers ----------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/clubs/gran%00ite/api/v1/programs"),
        ("GET", "/clubs/gran%00ite/api/v1/openapi.json"),
        ("PUT", "/internal/v1/clubs/gran%00ite"),
        ("PUT", "/internal/v1/clubs/granite/modules/webhooks%00"),
        ("PUT", "/internal/v1/clubs/granite/programs/tue%00league"),
        ("DELETE", "/internal/v1/clubs/granite/programs/tue%00league"),
        ("POST", "/internal/v1/clubs/gran%00ite/events"),
    ],
)
def test_a_nul_in_an_api_path_is_refused_before_any_lookup(
    client: TestClient,
    sessions: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
    granite: str,
    method: str,
    path: str,
) -> None:
    before = rows(sessions)
    headers = {"Authorization": f"Bearer {granite}"} if path.startswith("/clubs/") else AUTH
    body = {"event": "member.updated", "data": event_catalog.sample("member.updated", EPOCH)}
    answer = client.request(method, path, headers=headers, json=body if method != "GET" else None)
    assert _refused(answer, PATH_REFUSED) == PATH_REFUSED
    assert rows(sessions) == before
    no_traceback(caplog)
    fixed = path.replace("%00", "")
    assert client.request(method, fixed, headers=headers).status_code < 500


@pytest.mark.parametrize(
    "path",
    ["/clubs/gran%ED%A0%80ite/api/v1/programs", "/internal/v1/clubs/gran%FFite"],
    ids=["surrogate", "byte"],
)
def test_an_undecodable_escape_in_a_path_reads_as_a_replacement_character(
    client: TestClient, caplog: pytest.LogCaptureFixture, granite: str, path: str
) -> None:
    """The server decodes a path's escapes as UTF-8 with U+FFFD for what is not: text the
    database holds, so the path is answered as any other (no club has that slug)."""
    headers = {"Authorization": f"Bearer {granite}"} if path.startswith("/clubs/") else AUTH
    answer = client.get(path, headers=headers)
    assert answer.status_code in (401, 405)
    no_traceback(caplog)


def test_a_nul_in_the_query_string_is_refused(
    client: TestClient, caplog: pytest.LogCaptureFixture, granite: str
) -> None:
    bearer = {"Authorization": f"Bearer {granite}"}
    url = "/clubs/granite/api/v1/programs"
    refused = client.get(f"{url}?status=act%00ive", headers=bearer)
    expected = "The query string must not contain NUL characters (\\u0000)."
    assert _refused(refused, expected) == expected
    no_traceback(caplog)
    assert client.get(f"{url}?status=active", headers=bearer).status_code == 200


@pytest.mark.parametrize(
    "bad", [b"Bearer cw_live_\x00", b"Bearer \xed\xa0\x80"], ids=["nul", "byte"]
)
def test_a_key_holding_a_nul_is_no_key(
    client: TestClient, caplog: pytest.LogCaptureFixture, granite: str, bad: bytes
) -> None:
    """An API key or platform token holding NUL is not a key: 401, and nothing looked up."""
    programs = client.get("/clubs/granite/api/v1/programs", headers={b"Authorization": bad})
    assert programs.status_code == 401
    assert programs.json()["code"] == "invalid_token"
    internal = client.put(CLUB, json={"name": "Granite"}, headers={b"Authorization": bad})
    assert internal.status_code == 401
    no_traceback(caplog)


@pytest.fixture
def by_host(settings: Settings, tmp_path: Path) -> Iterator[TestClient]:
    host_settings = make_settings(
        settings.database_url, tmp_path, club_host_suffix=".clubs.example"
    )
    with TestClient(create_app(host_settings, FakeClock())) as client:
        yield client


def test_a_nul_in_the_host_is_refused(
    by_host: TestClient, caplog: pytest.LogCaptureFixture, granite: str
) -> None:
    bearer = {"Authorization": f"Bearer {granite}"}
    refused = by_host.get(
        "/api/v1/programs", headers={**bearer, "Host": f"gran{NUL}ite.clubs.example"}
    )
    expected = "The Host header must not contain NUL characters (\\u0000)."
    assert _refused(refused, expected) == expected
    no_traceback(caplog)
    served = by_host.get("/api/v1/programs", headers={**bearer, "Host": "granite.clubs.example"})
    assert served.status_code == 200
