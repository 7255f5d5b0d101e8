"""``POST /internal/v1/clubs/{slug}/erasures``: the platform erases a member; hostile bodies
get a precise 4xx with a problem+json body, never a 500 or half an erasure."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.storage.models import Erasure, Event
from tests.conftest import PLATFORM_TOKEN
from tests.factories import about

AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}
CLUB = "/internal/v1/clubs/granite"
ERASURES = f"{CLUB}/erasures"
EMAIL = "ada.unique@example.org"
NAME = "Ada Lovelace-Unique"


@pytest.fixture
def published(client: TestClient) -> list[str]:
    """A club with the module on and three events of Ada's (by the API, as the platform)."""
    assert client.put(CLUB, json={"name": "Granite"}, headers=AUTH).status_code == 201
    client.put(f"{CLUB}/modules/webhooks", json={"enabled": True}, headers=AUTH)
    found = []
    for seed, kind in enumerate(("registration.created", "member.updated", "practice_ice.booked")):
        data = about(kind, seed, id="mbr_ada", name=NAME, email=EMAIL)
        answer = client.post(f"{CLUB}/events", json={"event": kind, "data": data}, headers=AUTH)
        assert answer.status_code == 201, answer.text
        found.append(answer.json()["id"])
    return found


def _problem(answer: Any, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = answer.json()
    return body


def test_an_erasure_answers_its_record_and_a_repeat_finds_nothing_left(
    client: TestClient, sessions: sessionmaker[Session], published: list[str]
) -> None:
    dry = client.post(ERASURES, json={"email": EMAIL.upper(), "dryRun": True}, headers=AUTH)
    done = client.post(ERASURES, json={"email": EMAIL.upper()}, headers=AUTH)
    again = client.post(ERASURES, json={"memberId": "mbr_ada", "email": EMAIL}, headers=AUTH)

    assert dry.status_code == 200
    assert dry.json()["id"] is None
    assert done.status_code == 201
    record = done.json()
    assert record["id"].startswith("era_")
    assert record["counts"] == dry.json()["counts"]
    assert record["counts"]["events"] == 3
    assert record["counts"]["deliveries"] == 0
    assert (record["club"], record["requestedBy"], record["matchedBy"]) == (
        "granite",
        "platform",
        ["email"],
    )
    assert EMAIL not in done.text.lower()
    assert NAME not in done.text
    assert again.status_code == 201
    assert set(again.json()["counts"].values()) == {0}
    with sessions() as session:
        assert len(session.scalars(select(Erasure)).all()) == 2
        bodies = [session.get_one(Event, event_id).body for event_id in published]
    assert all(b'"name":"[erased]","email":"[erased]"' in body for body in bodies)


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ({}, 422, "give an email"),
        ({"email": "ada\u0000@example.org"}, 422, "NUL"),
        ({"email": "x" * 300 + "@example.org"}, 422, "email"),
        ({"email": "not an email"}, 422, "email"),
        ({"email": 42}, 422, "email"),
        ({"memberId": "mbr ada"}, 422, "memberId"),
        ({"memberId": "x" * 200}, 422, "memberId"),
        ({"email": EMAIL, "extra": "field"}, 422, "extra"),
        ({"email": EMAIL, "dryRun": "yes"}, 422, "dryRun"),
    ],
)
def test_a_bad_request_is_refused_precisely_and_changes_nothing(
    client: TestClient, published: list[str], body: dict[str, Any], status: int, said: str
) -> None:
    problem = _problem(client.post(ERASURES, json=body, headers=AUTH), status)
    assert said.lower() in orjson.dumps(problem).decode().lower()
    events_left = client.post(ERASURES, json={"email": EMAIL, "dryRun": True}, headers=AUTH)
    assert events_left.json()["counts"]["events"] == 3


def test_bodies_that_are_not_json_text_or_too_large_are_refused(
    client: TestClient, published: list[str]
) -> None:
    headers = {**AUTH, "Content-Type": "application/json"}
    _problem(client.post(ERASURES, content=b'{"email":"\xff\xfe@x.org"}', headers=headers), 400)
    huge = orjson.dumps({"email": "a" * (1024 * 1024) + "@example.org"})
    _problem(client.post(ERASURES, content=huge, headers=headers), 413)


def test_an_unknown_club_a_member_of_another_club_and_no_token(
    client: TestClient, published: list[str]
) -> None:
    _problem(
        client.post("/internal/v1/clubs/nope/erasures", json={"email": EMAIL}, headers=AUTH), 404
    )
    client.put("/internal/v1/clubs/basalt", json={"name": "Basalt"}, headers=AUTH)
    elsewhere = client.post(
        "/internal/v1/clubs/basalt/erasures", json={"email": EMAIL}, headers=AUTH
    )
    assert elsewhere.status_code == 201
    assert elsewhere.json()["counts"]["events"] == 0
    _problem(client.post(ERASURES, json={"email": EMAIL}), 401)
    lookalike = "аda.unique@example.org"  # a Cyrillic а: another address
    other = client.post(ERASURES, json={"email": lookalike}, headers=AUTH)
    assert other.status_code == 201
    assert other.json()["counts"]["events"] == 0
