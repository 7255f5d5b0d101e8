"""``/internal/v1``: the host platform syncs clubs, the module switch and programs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog
from clubwire.settings import Settings
from clubwire.storage.models import Club, Delivery, Event, Program
from clubwire.web.app import create_app
from tests.conftest import PLATFORM_TOKEN, make_settings
from tests.factories import EPOCH, FakeClock, make_endpoint, make_key, program_data, registration

AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
CLUB = "/internal/v1/clubs/granite"
PROGRAM = f"{CLUB}/programs/tue-league"


def _count(sessions: sessionmaker[Session], model: type[Club] | type[Program]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(model)) or 0


def test_put_club_creates_then_renames(client: TestClient) -> None:
    created = client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    assert created.status_code == 201
    renamed = client.put(CLUB, json={"name": "Granite Curling Club"}, headers=AUTH)
    assert renamed.status_code == 200
    body = renamed.json()
    assert body["id"] == created.json()["id"]
    assert body["name"] == "Granite Curling Club"
    assert body["webhooksEnabled"] is False
    assert body["baseUrl"] == "http://127.0.0.1:8000/clubs/granite"


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong-token-0123456789"}, 401),
        ({"Authorization": "Basic eA=="}, 401),
    ],
)
def test_the_platform_token_is_required(
    client: TestClient, sessions: sessionmaker[Session], headers: dict[str, str], status: int
) -> None:
    response = client.put(CLUB, json={"name": "Granite"}, headers=headers)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert _count(sessions, Club) == 0


def test_a_non_ascii_token_is_refused_not_crashed(client: TestClient) -> None:
    response = client.put(
        CLUB, json={"name": "G"}, headers={b"Authorization": "Bearer tökén".encode("latin-1")}
    )
    assert response.status_code == 401


def test_without_a_configured_token_the_internal_api_is_off(
    settings: Settings, tmp_path: Path
) -> None:
    off = make_settings(settings.database_url, tmp_path, platform_token=None)
    with TestClient(create_app(off)) as client:
        response = client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    assert response.status_code == 403
    assert "CLUBWIRE_PLATFORM_TOKEN" in response.json()["detail"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/internal/v1/clubs/Not_A_Slug", {"name": "x"}),
        (CLUB, {"name": ""}),
        (CLUB, {}),
        (CLUB, {"name": "x", "extra": 1}),
        (CLUB, ["not", "an", "object"]),
    ],
)
def test_invalid_club_input_is_422_and_stores_nothing(
    client: TestClient, sessions: sessionmaker[Session], path: str, body: object
) -> None:
    response = client.put(path, json=body, headers=AUTH)
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_input"
    assert _count(sessions, Club) == 0


@pytest.mark.parametrize("name", ["Granite\r\nCurling", "Granite\u0085", "Gran\u202eite"])
def test_a_club_name_with_a_control_character_is_422_naming_the_field(
    client: TestClient, sessions: sessionmaker[Session], name: str
) -> None:
    client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    response = client.put(CLUB, json={"name": name}, headers=AUTH)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "invalid_input"
    (problem,) = body["errors"]
    assert problem["location"] == "body.name"
    assert "must be one line, without control or text-direction characters" in problem["message"]
    with sessions() as session:
        assert session.scalars(select(Club.name)).all() == ["Granite"]


def test_payload_days_are_set_kept_when_left_out_and_cleared(
    client: TestClient, sessions: sessionmaker[Session]
) -> None:
    created = client.put(CLUB, json={"name": "Granite", "payloadDays": 7}, headers=AUTH)
    assert (created.status_code, created.json()["payloadDays"]) == (201, 7)
    renamed = client.put(CLUB, json={"name": "Granite Curling Club"}, headers=AUTH)
    assert renamed.json()["payloadDays"] == 7
    longest = client.put(CLUB, json={"name": "Granite", "payloadDays": 30.0}, headers=AUTH)
    assert longest.json()["payloadDays"] == 30  # CLUBWIRE_RETENTION_DAYS; a JSON integer
    cleared = client.put(CLUB, json={"name": "Granite", "payloadDays": None}, headers=AUTH)
    assert cleared.json()["payloadDays"] is None
    with sessions() as session:
        assert session.scalars(select(Club.payload_days)).all() == [None]


@pytest.mark.parametrize(
    ("days", "said"),
    [
        (-1, "greater than or equal to 1"),
        (0, "greater than or equal to 1"),
        (31, "from 1 to 30: payloads are never kept longer than the history"),
        (10**30, "from 1 to 30"),
        ("7", "must be a number, not text or a boolean"),
        (True, "must be a number, not text or a boolean"),
        (7.5, "valid integer"),
        ([7], "valid integer"),
    ],
)
def test_payload_days_that_are_no_days_are_422_and_change_nothing(
    client: TestClient, sessions: sessionmaker[Session], days: object, said: str
) -> None:
    client.put(CLUB, json={"name": "Granite", "payloadDays": 5}, headers=AUTH)
    response = client.put(CLUB, json={"name": "Renamed", "payloadDays": days}, headers=AUTH)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "invalid_input"
    assert said in response.json()["detail"]
    with sessions() as session:
        assert session.execute(select(Club.name, Club.payload_days)).all() == [("Granite", 5)]


def test_payload_days_of_thousands_of_digits_are_refused_not_crashed(
    client: TestClient, sessions: sessionmaker[Session]
) -> None:
    """More digits than Python reads as an int: a body that cannot be read (400)."""
    body = b'{"name": "Granite", "payloadDays": 1' + b"0" * 5000 + b"}"
    response = client.put(CLUB, content=body, headers={**AUTH, **JSON})
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    assert _count(sessions, Club) == 0


def test_malformed_json_is_422(client: TestClient) -> None:
    response = client.put(
        CLUB, content=b"{nope", headers={**AUTH, "Content-Type": "application/json"}
    )
    assert response.status_code == 422


def test_module_switch(client: TestClient) -> None:
    client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    on = client.put(f"{CLUB}/modules/webhooks", json={"enabled": True}, headers=AUTH)
    assert on.status_code == 200
    assert on.json()["webhooksEnabled"] is True
    again = client.put(f"{CLUB}/modules/webhooks", json={"enabled": True}, headers=AUTH)
    assert again.json()["webhooksEnabled"] is True
    bad = client.put(f"{CLUB}/modules/webhooks", json={"enabled": "maybe"}, headers=AUTH)
    assert bad.status_code == 422


def test_module_switch_of_an_unknown_club_is_404(client: TestClient) -> None:
    response = client.put(f"{CLUB}/modules/webhooks", json={"enabled": True}, headers=AUTH)
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_put_program_creates_updates_and_shows_in_the_api(
    client: TestClient, sessions: sessionmaker[Session]
) -> None:
    client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    client.put(f"{CLUB}/modules/webhooks", json={"enabled": True}, headers=AUTH)
    created = client.put(PROGRAM, json=program_data(), headers=AUTH)
    assert created.status_code == 201
    assert created.json()["private"] is False
    updated = client.put(PROGRAM, json=program_data(capacity=60), headers=AUTH)
    assert (updated.status_code, updated.json()["capacity"]) == (200, 60)
    with sessions.begin() as session:
        _, key = make_key(session, session.scalars(select(Club)).one())
    listed = client.get(
        "/clubs/granite/api/v1/programs", headers={"Authorization": f"Bearer {key}"}
    )
    assert [(p["id"], p["capacity"]) for p in listed.json()["data"]] == [("tue-league", 60)]


@pytest.mark.parametrize(
    "body",
    [
        program_data(startDate="2026-01-13T18:30:00"),
        program_data(endDate="2025-01-01T00:00:00Z"),
        program_data(price=-1),
        program_data(type="CURLING_PARTY"),
        program_data(id="tue-league"),
        {"name": "only a name"},
    ],
)
def test_invalid_program_is_422_and_stores_nothing(
    client: TestClient, sessions: sessionmaker[Session], body: dict[str, object]
) -> None:
    client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    response = client.put(PROGRAM, json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.json()["errors"]
    assert _count(sessions, Program) == 0


# 21,474,836.48 is the first price whose cents a 32-bit integer cannot hold.
@pytest.mark.parametrize(
    ("sent", "shown"),
    [
        (21_474_836.48, b'"price":21474836.48,'),
        ("21474836.48", b'"price":21474836.48,'),
        (99_999_999.98, b'"price":99999999.98,'),
        (99_999_999.99, b'"price":99999999.99,'),
        ("99999999.99", b'"price":99999999.99,'),
    ],
)
def test_the_largest_prices_are_stored_and_read_back_exactly(
    client: TestClient, sessions: sessionmaker[Session], sent: object, shown: bytes
) -> None:
    client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    client.put(f"{CLUB}/modules/webhooks", json={"enabled": True}, headers=AUTH)
    stored = client.put(PROGRAM, json=program_data(price=sent), headers=AUTH)
    assert (stored.status_code, stored.json()["price"]) == (201, float(str(sent)))
    with sessions.begin() as session:
        _, key = make_key(session, session.scalars(select(Club)).one())
    listed = client.get(
        "/clubs/granite/api/v1/programs", headers={"Authorization": f"Bearer {key}"}
    )
    assert shown in listed.content
    assert listed.json()["data"][0]["price"] == float(str(sent))


@pytest.mark.parametrize("price", [100_000_000.00, "100000000.00", 100_000_000, 1e300])
def test_a_price_above_the_largest_is_422_naming_it_and_stores_nothing(
    client: TestClient, sessions: sessionmaker[Session], price: object
) -> None:
    client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    response = client.put(PROGRAM, json=program_data(price=price), headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert [error["location"] for error in response.json()["errors"]] == ["body.price"]
    assert _count(sessions, Program) == 0


def test_the_documented_largest_price_is_the_one_enforced(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    number, text = document["components"]["schemas"]["ProgramData"]["properties"]["price"]["anyOf"]
    assert number["maximum"] == 99_999_999.99
    assert re.fullmatch(text["pattern"], "99999999.99")
    assert not re.fullmatch(text["pattern"], "100000000.00")


def test_program_of_an_unknown_club_is_404(client: TestClient) -> None:
    assert client.put(PROGRAM, json=program_data(), headers=AUTH).status_code == 404
    assert client.delete(PROGRAM, headers=AUTH).status_code == 404


def test_a_bad_program_id_is_422(client: TestClient) -> None:
    client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    response = client.put(f"{CLUB}/programs/-starts-with-dash", json=program_data(), headers=AUTH)
    assert response.status_code == 422


def test_delete_program_is_idempotent(client: TestClient, sessions: sessionmaker[Session]) -> None:
    client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    client.put(PROGRAM, json=program_data(), headers=AUTH)
    assert client.delete(PROGRAM, headers=AUTH).status_code == 204
    assert client.delete(PROGRAM, headers=AUTH).status_code == 204
    assert _count(sessions, Program) == 0


@pytest.fixture
def host_client(settings: Settings, tmp_path: Path) -> Iterator[TestClient]:
    by_host = make_settings(settings.database_url, tmp_path, club_host_suffix=".api.example.com")
    with TestClient(create_app(by_host, FakeClock())) as client:
        yield client


def test_host_based_base_url(host_client: TestClient, sessions: sessionmaker[Session]) -> None:
    host_client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    on = host_client.put(f"{CLUB}/modules/webhooks", json={"enabled": True}, headers=AUTH)
    assert on.json()["baseUrl"] == "https://granite.api.example.com"
    host_client.put(PROGRAM, json=program_data(), headers=AUTH)
    with sessions.begin() as session:
        _, key = make_key(session, session.scalars(select(Club)).one())
    bearer = {"Authorization": f"Bearer {key}"}
    by_host = host_client.get(
        "/api/v1/programs", headers={**bearer, "Host": "granite.api.example.com"}
    )
    assert [p["id"] for p in by_host.json()["data"]] == ["tue-league"]
    elsewhere = host_client.get(
        "/api/v1/programs", headers={**bearer, "Host": "marble.api.example.com"}
    )
    assert elsewhere.status_code == 401
    assert host_client.get("/clubs/granite/api/v1/programs", headers=bearer).status_code == 404
    document = host_client.get(
        "/api/v1/openapi.json", headers={"Host": "granite.api.example.com:443"}
    ).json()
    assert document["servers"][0]["url"] == "https://granite.api.example.com"


EVENTS = f"{CLUB}/events"


def _with_endpoint(client: TestClient, sessions: sessionmaker[Session], settings: Settings) -> None:
    client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
    client.put(f"{CLUB}/modules/webhooks", json={"enabled": True}, headers=AUTH)
    with sessions.begin() as session:
        make_endpoint(session, session.scalars(select(Club)).one(), settings)


def test_publish_creates_an_event_and_its_deliveries(
    client: TestClient, sessions: sessionmaker[Session], settings: Settings
) -> None:
    _with_endpoint(client, sessions, settings)
    response = client.post(
        EVENTS, json={"event": "registration.created", "data": registration()}, headers=AUTH
    )
    assert response.status_code == 201
    event_id = response.json()["id"]
    assert event_id.startswith("evt_")
    with sessions() as session:
        assert [d.event_id for d in session.scalars(select(Delivery))] == [event_id]


def test_a_publish_answers_the_events_ordering_key_and_sequence(
    client: TestClient, sessions: sessionmaker[Session], settings: Settings
) -> None:
    _with_endpoint(client, sessions, settings)
    data = registration()
    key = f"invoice:{data['invoice']['id']}"
    body = {"event": "registration.created", "data": data}
    answers = [client.post(EVENTS, json=body, headers=AUTH).json() for _ in range(2)]
    assert [(a["orderingKey"], a["sequence"]) for a in answers] == [(key, 1), (key, 2)]


def test_a_repeated_idempotency_key_returns_the_first_event(
    client: TestClient, sessions: sessionmaker[Session], settings: Settings
) -> None:
    _with_endpoint(client, sessions, settings)
    body = {"event": "registration.created", "data": registration()}
    headers = {**AUTH, "Idempotency-Key": "order-1234"}
    first = client.post(EVENTS, json=body, headers=headers)
    again = client.post(EVENTS, json=body, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Delivery)) == 1


def test_an_idempotency_key_reused_for_other_data_is_a_409_and_stores_nothing(
    client: TestClient, sessions: sessionmaker[Session], settings: Settings
) -> None:
    _with_endpoint(client, sessions, settings)
    headers = {**AUTH, "Idempotency-Key": "order-1234"}
    body = {"event": "registration.created", "data": registration()}
    first = client.post(EVENTS, json=body, headers=headers)
    other = {"event": "registration.created", "data": registration(invoice=None)}
    reused = client.post(EVENTS, json=other, headers=headers)
    assert (first.status_code, reused.status_code) == (201, 409)
    assert reused.headers["content-type"] == "application/problem+json"
    problem = reused.json()
    assert (problem["code"], problem["status"]) == ("idempotency_key_reused", 409)
    assert first.json()["id"] in problem["detail"]
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 1
        assert session.scalar(select(func.count()).select_from(Delivery)) == 1


@pytest.mark.parametrize(
    "body",
    [
        {"event": "registration.created", "data": {"member": {}}},
        {"event": "registration.created", "data": registration(secretNotes="x")},
        {"event": "no.such.event", "data": {}},
        {"event": "ping", "data": {"message": "hello"}},
        {"event": "registration.created"},
        {"event": "registration.created", "data": registration(), "extra": True},
    ],
)
def test_invalid_events_are_422_and_store_nothing(
    client: TestClient, sessions: sessionmaker[Session], settings: Settings, body: dict[str, object]
) -> None:
    _with_endpoint(client, sessions, settings)
    response = client.post(EVENTS, json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("game.updated", ("sides", 0, "score"), False),
        ("game.updated", ("sides", 1, "score"), "3"),
        ("payment.completed", ("payment", "amount"), "367.25"),
    ],
)
def test_data_of_the_wrong_json_type_is_422_naming_the_field_and_stores_nothing(
    client: TestClient,
    sessions: sessionmaker[Session],
    settings: Settings,
    kind: str,
    path: tuple[str | int, ...],
    value: object,
) -> None:
    _with_endpoint(client, sessions, settings)
    data: Any = event_catalog.sample(kind, EPOCH)
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    response = client.post(EVENTS, json={"event": kind, "data": data}, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    named = "data" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    assert response.json()["detail"].startswith(f"{named}: must be a number"), response.text
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0


@pytest.mark.parametrize(
    ("key", "status"),
    [("order-1234", 201), ("é", 201), (" a b ", 201), ("", 422), ("\x85", 422), ("a\xa0", 422)],
)
def test_an_idempotency_key_is_taken_exactly_when_the_document_allows_it(
    client: TestClient, sessions: sessionmaker[Session], settings: Settings, key: str, status: int
) -> None:
    """Schemathesis found an empty key documented (a string of at most 255) but refused."""
    _with_endpoint(client, sessions, settings)
    operation = client.get("/openapi.json").json()["paths"]["/internal/v1/clubs/{slug}/events"]
    (header,) = [p for p in operation["post"]["parameters"] if p["name"] == "idempotency-key"]
    documented = jsonschema_rs.validator_for(header["schema"]).is_valid(key)
    body = {"event": "registration.created", "data": registration()}
    headers = {
        b"Authorization": AUTH["Authorization"].encode(),
        b"Idempotency-Key": key.encode("latin-1"),
    }
    response = client.post(EVENTS, json=body, headers=headers)
    assert (response.status_code, documented) == (status, status == 201), response.text


def test_publish_to_an_unknown_club_is_404(client: TestClient) -> None:
    response = client.post(
        EVENTS, json={"event": "registration.created", "data": registration()}, headers=AUTH
    )
    assert response.status_code == 404


# -- request size ------------------------------------------------------------------------

SMALL = 1024


@pytest.fixture
def small(settings: Settings, clock: FakeClock) -> Iterator[TestClient]:
    """The app with the smallest body limit allowed: 1 KiB."""
    limited = settings.model_copy(update={"max_request_bytes": SMALL})
    with TestClient(create_app(limited, clock), raise_server_exceptions=False) as client:
        yield client


def _event(padding: int = 0) -> bytes:
    data = registration(member={"id": "m1", "name": "A" + "a" * padding, "email": "a@x.ca"})
    return orjson.dumps({"event": "registration.created", "data": data})


def test_a_body_within_the_limit_is_published(
    small: TestClient, sessions: sessionmaker[Session], settings: Settings
) -> None:
    _with_endpoint(small, sessions, settings)
    body = _event()
    assert len(body) <= SMALL
    response = small.post(EVENTS, content=body, headers={**AUTH, **JSON})
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_is_413_before_it_is_read_and_stores_nothing(
    small: TestClient, sessions: sessionmaker[Session], settings: Settings, declared: bool
) -> None:
    _with_endpoint(small, sessions, settings)
    body = _event(padding=SMALL)  # valid but for its size: the limit comes first
    content = body if declared else iter([body[:600], body[600:]])
    response = small.post(EVENTS, content=content, headers={**AUTH, **JSON})
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "too_large"
    assert response.json()["detail"] == f"A request body may have at most {SMALL} bytes."
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0


def test_the_limit_holds_before_sign_in_too(small: TestClient) -> None:
    response = small.post("/sign-in", content=b"email=" + b"a" * SMALL, headers=FORM)
    assert response.status_code == 413
