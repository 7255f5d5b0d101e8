"""``POST /internal/v1/clubs/{slug}/events/batch``: up to 100 events in one transaction, each
answered with its id (the earlier one for a repeated key); one refused event refuses the
batch, naming it, and writes nothing."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog
from clubwire.settings import Settings
from clubwire.storage.models import Club, Delivery, Event
from tests.conftest import PLATFORM_TOKEN
from tests.factories import EPOCH, about, make_club, make_endpoint, registration

AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}
BATCH = "/internal/v1/clubs/granite/events/batch"
KINDS = ("registration.created", "payment.completed", "member.updated")
SENDERS = 6


@pytest.fixture
def endpoints(sessions: sessionmaker[Session], settings: Settings) -> dict[str, set[str]]:
    """Granite, its module on, with three endpoints: each kind's subscribers, by id."""
    with sessions.begin() as session:
        club = make_club(session, "granite")
        subscribed = [KINDS[:1], KINDS[1:], KINDS]
        made = [make_endpoint(session, club, settings, kinds=kinds)[0] for kinds in subscribed]
        return {kind: {e.id for e in made if kind in e.events.split()} for kind in KINDS}


def _events(count: int, **extra: object) -> list[dict[str, Any]]:
    """``count`` valid events, the kinds in turn, each with its own sample data."""
    rng = random.Random(count)
    return [
        {"event": kind, "data": event_catalog.sample(kind, EPOCH, rng), **extra}
        for kind in (KINDS[n % len(KINDS)] for n in range(count))
    ]


def _counts(sessions: sessionmaker[Session]) -> tuple[int, int]:
    with sessions() as session:
        count = func.count()
        return (
            session.scalar(select(count).select_from(Event)) or 0,
            session.scalar(select(count).select_from(Delivery)) or 0,
        )


def test_a_batch_of_100_publishes_each_event_to_its_subscribers_in_order(
    client: TestClient, sessions: sessionmaker[Session], endpoints: dict[str, set[str]]
) -> None:
    sent = _events(100)
    answer = client.post(BATCH, json={"events": sent}, headers=AUTH)
    assert answer.status_code == 201, answer.text
    published = answer.json()["events"]
    assert [p["repeated"] for p in published] == [False] * 100
    with sessions() as session:
        stored = {e.id: e for e in session.scalars(select(Event))}
        delivered: dict[str, set[str]] = {}
        for delivery in session.scalars(select(Delivery)):
            delivered.setdefault(delivery.event_id, set()).add(delivery.endpoint_id)
    assert [stored[p["id"]].kind for p in published] == [e["event"] for e in sent]
    assert {p["id"]: delivered[p["id"]] for p in published} == {
        p["id"]: endpoints[e["event"]] for p, e in zip(published, sent, strict=True)
    }
    ordered = [(p["orderingKey"], p["sequence"]) for p in published if p["orderingKey"]]
    assert ordered == [
        (stored[p["id"]].ordering_key, stored[p["id"]].sequence)
        for p in published
        if p["orderingKey"]
    ]


def test_an_event_refused_last_writes_nothing_and_is_named(
    client: TestClient, sessions: sessionmaker[Session], endpoints: dict[str, set[str]]
) -> None:
    sent = [*_events(99), {"event": "registration.created", "data": {"member": {}}}]
    answer = client.post(BATCH, json={"events": sent}, headers=AUTH)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["code"] == "invalid_input"
    assert [e["location"] for e in problem["errors"]] == ["body.events.99"]
    assert problem["detail"].startswith("body.events.99: data.")
    assert _counts(sessions) == (0, 0)


BAD_EVENTS: list[tuple[dict[str, Any], str]] = [
    ({"event": "no.such.event", "data": {}}, "unknown event kind"),
    ({"event": "ping", "data": {"message": "hi"}}, "ping"),
    ({"event": "registration.created", "data": {"member": {}}}, "field required"),
    ({"event": "registration.created", "data": registration(secretNotes="x")}, "secretNotes"),
    ({"event": "registration.created"}, "data"),
    ({"data": registration()}, "event"),
    ({"event": "registration.created", "data": [1]}, "data"),
    ({"event": "registration.created", "data": registration(), "extra": 1}, "extra"),
    ({"event": "registration.created", "data": registration(), "idempotencyKey": ""}, "idem"),
    ({"event": "registration.created", "data": registration(), "idempotencyKey": "a\x00"}, "idem"),
    ({"event": "registration.created", "data": registration(), "idempotencyKey": "   "}, "idem"),
    (
        {"event": "registration.created", "data": registration(), "idempotencyKey": "k" * 256},
        "idem",
    ),
    ({"event": "registration.created", "data": registration(), "idempotencyKey": "日"}, "idem"),
    (
        {"event": "registration.created", "data": about("registration.created", name="A\x00")},
        "data.member.name",
    ),
    ("not an object", "events.1"),  # type: ignore[list-item]
]


@pytest.mark.parametrize(("bad", "named"), BAD_EVENTS)
def test_each_kind_of_bad_event_refuses_the_batch_naming_it(
    client: TestClient,
    sessions: sessionmaker[Session],
    endpoints: dict[str, set[str]],
    bad: object,
    named: str,
) -> None:
    sent = [*_events(1), bad, *_events(1)]
    answer = client.post(BATCH, json={"events": sent}, headers=AUTH)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    locations = [e["location"] for e in problem["errors"]]
    assert locations, problem
    assert all(where.startswith("body.events.1") for where in locations), problem
    assert named.lower() in problem["detail"].lower(), problem
    assert _counts(sessions) == (0, 0)


@pytest.mark.parametrize("count", [0, 101])
def test_a_batch_of_none_or_over_100_is_refused_and_writes_nothing(
    client: TestClient, sessions: sessionmaker[Session], endpoints: dict[str, set[str]], count: int
) -> None:
    answer = client.post(BATCH, json={"events": _events(count)}, headers=AUTH)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert [e["location"] for e in problem["errors"]] == ["body.events"]
    assert str(count) in problem["detail"] or count == 0
    assert _counts(sessions) == (0, 0)


@pytest.mark.parametrize("body", [[], {"events": []}, {"event": "x"}, {"events": {}}, "x"])
def test_a_body_that_is_no_batch_is_refused(
    client: TestClient, endpoints: dict[str, set[str]], body: object
) -> None:
    answer = client.post(BATCH, json=body, headers=AUTH)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"


def test_repeated_keys_answer_the_earlier_ids_and_make_nothing(
    client: TestClient, sessions: sessionmaker[Session], endpoints: dict[str, set[str]]
) -> None:
    sent = [{**event, "idempotencyKey": f"order-{n}"} for n, event in enumerate(_events(3))]
    first = client.post(BATCH, json={"events": sent[:2]}, headers=AUTH)
    again = client.post(BATCH, json={"events": sent}, headers=AUTH)
    all_again = client.post(BATCH, json={"events": sent}, headers=AUTH)
    assert (first.status_code, again.status_code, all_again.status_code) == (201, 201, 200)
    ids = [p["id"] for p in first.json()["events"]]
    assert [p["id"] for p in again.json()["events"]][:2] == ids
    assert [p["repeated"] for p in again.json()["events"]] == [True, True, False]
    assert [p["id"] for p in all_again.json()["events"]] == [
        p["id"] for p in again.json()["events"]
    ]
    assert _counts(sessions)[0] == 3


def test_a_key_published_alone_is_a_repeat_in_a_batch(
    client: TestClient, endpoints: dict[str, set[str]]
) -> None:
    (event,) = _events(1)
    alone = client.post(
        "/internal/v1/clubs/granite/events",
        json=event,
        headers={**AUTH, "Idempotency-Key": "order-1"},
    )
    batch = client.post(
        BATCH, json={"events": [{**event, "idempotencyKey": "order-1"}]}, headers=AUTH
    )
    assert (alone.status_code, batch.status_code) == (201, 200)
    assert batch.json()["events"] == [{**alone.json(), "repeated": True}]


def test_a_key_twice_in_one_batch_gives_the_first_event_twice(
    client: TestClient, sessions: sessionmaker[Session], endpoints: dict[str, set[str]]
) -> None:
    (event,) = _events(1, idempotencyKey="order-1")
    answer = client.post(BATCH, json={"events": [event, event]}, headers=AUTH)
    assert answer.status_code == 201, answer.text
    first, second = answer.json()["events"]
    assert (first["id"], first["repeated"], second["repeated"]) == (second["id"], False, True)
    assert _counts(sessions) == (1, len(endpoints[event["event"]]))


def test_a_key_twice_in_one_batch_with_other_data_is_409_naming_the_second(
    client: TestClient, sessions: sessionmaker[Session], endpoints: dict[str, set[str]]
) -> None:
    one, other = _events(2, idempotencyKey="order-1")
    answer = client.post(BATCH, json={"events": [one, other]}, headers=AUTH)
    assert answer.status_code == 409, answer.text
    problem = answer.json()
    assert (problem["code"], problem["errors"][0]["location"]) == (
        "idempotency_key_reused",
        "body.events.1",
    )
    assert _counts(sessions) == (0, 0)


def test_a_batch_for_a_club_with_the_module_off_records_events_without_deliveries(
    client: TestClient, sessions: sessionmaker[Session], endpoints: dict[str, set[str]]
) -> None:
    with sessions.begin() as session:
        session.scalars(select(Club)).one().webhooks_enabled = False
    answer = client.post(BATCH, json={"events": _events(2)}, headers=AUTH)
    assert answer.status_code == 201, answer.text
    assert _counts(sessions) == (2, 0)


def test_a_batch_for_an_unknown_club_is_404(client: TestClient) -> None:
    answer = client.post(BATCH, json={"events": _events(1)}, headers=AUTH)
    assert answer.status_code == 404
    assert answer.json()["code"] == "not_found"


def test_a_batch_needs_the_platform_token(
    client: TestClient, sessions: sessionmaker[Session], endpoints: dict[str, set[str]]
) -> None:
    answer = client.post(BATCH, json={"events": _events(1)})
    assert answer.status_code == 401
    assert _counts(sessions) == (0, 0)


def test_the_same_keyed_batch_sent_at_once_makes_each_event_once(
    client: TestClient, sessions: sessionmaker[Session], endpoints: dict[str, set[str]]
) -> None:
    """The losers of the race for the keys (a unique violation at the winner's commit) are
    run again, and find the winner's events."""
    sent = [{**event, "idempotencyKey": f"order-{n}"} for n, event in enumerate(_events(20))]
    start = threading.Barrier(SENDERS)

    def send(_: int) -> tuple[int, list[str]]:
        start.wait()
        answer = client.post(BATCH, json={"events": sent}, headers=AUTH)
        return answer.status_code, [event["id"] for event in answer.json()["events"]]

    with ThreadPoolExecutor(SENDERS) as pool:
        answers = list(pool.map(send, range(SENDERS)))
    assert sorted(status for status, _ in answers) == [200] * (SENDERS - 1) + [201], answers
    assert len({tuple(ids) for _, ids in answers}) == 1
    assert _counts(sessions)[0] == len(sent)


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b'{"events": [{"event": "\xff"}]}', 400),  # not UTF-8
        (b'{"events": [', 422),  # not JSON: FastAPI's "JSON decode error" at its offset
        (b'{"events": [{"event": "a\x00"}]}', 422),  # a raw NUL: not JSON either
        (b'{"events": [' + b'{"event": "x", "data": {}},' * 60_000 + b"]}", 413),  # 1.6 MB
    ],
)
def test_a_body_that_is_no_json_or_too_large_is_refused_and_writes_nothing(
    client: TestClient,
    sessions: sessionmaker[Session],
    endpoints: dict[str, set[str]],
    content: bytes,
    status: int,
) -> None:
    answer = client.post(
        BATCH, content=content, headers={**AUTH, "Content-Type": "application/json"}
    )
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert _counts(sessions) == (0, 0)
