"""Traces from publish to receipt (issue 36), against a real OTLP/HTTP collector
(``tests.collector``) and a real TLS receiver, on both databases: the platform's publish
continues its ``traceparent``; every attempt of the event's delivery, its HTTP request and
its record are spans of that one trace; the receiver is sent a ``traceparent`` of it; log
lines written in a span carry its ids; a collector that is down or stuck costs no delivery.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
from aiohttp import web
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import tracing
from clubwire.settings import Settings
from clubwire.storage.models import Attempt, Event
from clubwire.web.app import create_app
from tests.collector import Collected, Collector, collecting
from tests.conftest import PLATFORM_TOKEN
from tests.factories import about, registration
from tests.functional.workers import (
    add_endpoint,
    count_settled,
    deliver_until,
    delivery_statuses,
    publish_registrations,
)
from tests.logcapture import capturing
from tests.receiver import Authority, Receiver, listening

PLATFORM_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PLATFORM_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{PLATFORM_TRACE}-{PLATFORM_SPAN}-01"
TRACESTATE = "platform=checkout-7,congo=t61rcWkgMzE"
PUBLISH = "/internal/v1/clubs/granite/events"


def _start(monkeypatch: pytest.MonkeyPatch, collector: Collector, **variables: str) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert tracing.start("test")


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Collector]:
    """A collector, and this process traced into it for the test's length."""
    with collecting() as collector:
        _start(monkeypatch, collector)
        try:
            yield collector
        finally:
            tracing.stop()


def _publish(settings: Settings, headers: Mapping[bytes, bytes]) -> str:
    """One registration.created through the internal API; the event's id."""
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        answer = client.post(
            PUBLISH,
            json={"event": "registration.created", "data": registration()},
            headers={b"authorization": f"Bearer {PLATFORM_TOKEN}".encode(), **headers},
        )
    assert answer.status_code == 201, answer.text
    event_id: str = answer.json()["id"]
    return event_id


def _in(trace_id: str, spans: list[Collected], name: str) -> list[Collected]:
    return [span for span in spans if span.trace_id == trace_id and span.name == name]


def _one(found: list[Collected]) -> Collected:
    assert len(found) == 1, found
    return found[0]


def _parent_of(traceparent: str) -> tuple[str, str]:
    """The trace id and span id a ``traceparent`` names."""
    version, trace_id, span_id, flags = traceparent.split("-")
    assert (version, flags) == ("00", "01")
    return trace_id, span_id


def test_one_trace_holds_the_publish_both_attempts_and_their_records(
    collector: Collector,
    hooks: Settings,
    sessions: sessionmaker[Session],
    tls: Authority,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arrived: list[dict[str, str]] = []

    async def fail_once(request: web.Request) -> web.Response:
        arrived.append(dict(request.headers))
        return web.Response(status=500 if len(arrived) == 1 else 200)

    with listening(tls, fail_once) as url:
        add_endpoint(sessions, hooks, url)
        platform = {b"traceparent": TRACEPARENT.encode(), b"tracestate": TRACESTATE.encode()}
        event_id = _publish(hooks, platform)
        with capturing(monkeypatch) as logged:
            twice = [("succeeded", 2)]
            deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == twice)

    spans = collector.wait_for(lambda spans: len(_in(PLATFORM_TRACE, spans, "record")) == 2)
    served = _one(_in(PLATFORM_TRACE, spans, "POST /internal/v1/clubs/{slug}/events"))
    assert (served.kind, served.parent_id) == ("SPAN_KIND_SERVER", PLATFORM_SPAN)
    assert served.attributes["http.response.status_code"] == 201
    assert served.attributes["http.route"] == "/internal/v1/clubs/{slug}/events"
    published = _one(_in(PLATFORM_TRACE, spans, "publish registration.created"))
    assert (published.kind, published.parent_id) == ("SPAN_KIND_PRODUCER", served.span_id)
    assert published.attributes["clubwire.event.id"] == event_id
    assert published.attributes["clubwire.deliveries"] == 1

    delivered = sorted(
        _in(PLATFORM_TRACE, spans, "deliver registration.created"),
        key=lambda span: span.attributes["clubwire.attempt"],  # type: ignore[arg-type,return-value]
    )
    assert [span.attributes["clubwire.attempt"] for span in delivered] == [1, 2]
    assert [span.attributes["clubwire.delivery.outcome"] for span in delivered] == [
        "retrying",
        "succeeded",
    ]
    for span in delivered:
        assert (span.kind, span.parent_id) == ("SPAN_KIND_CONSUMER", published.span_id)
        assert span.attributes["clubwire.event.id"] == event_id
        assert isinstance(span.attributes["clubwire.queue.wait_ms"], int)

    posts = _in(PLATFORM_TRACE, spans, "POST")
    assert sorted(post.parent_id for post in posts) == sorted(s.span_id for s in delivered)
    by_attempt = {post.parent_id: post for post in posts}
    failed, succeeded = (by_attempt[span.span_id] for span in delivered)
    assert failed.attributes["http.response.status_code"] == 500
    assert failed.attributes["error.type"] == "500"
    assert failed.status == "STATUS_CODE_ERROR"
    assert succeeded.attributes["http.response.status_code"] == 200
    assert "error.type" not in succeeded.attributes
    for post in posts:
        assert post.kind == "SPAN_KIND_CLIENT"
        assert post.attributes["http.request.method"] == "POST"
        assert post.attributes["server.address"] == "127.0.0.1"
        assert "url.full" not in post.attributes

    records = _in(PLATFORM_TRACE, spans, "record")
    assert sorted(record.parent_id for record in records) == sorted(s.span_id for s in delivered)

    # The receiver was sent each attempt's own span, in the platform's trace and state.
    assert [_parent_of(headers["traceparent"]) for headers in arrived] == [
        (PLATFORM_TRACE, failed.span_id),
        (PLATFORM_TRACE, succeeded.span_id),
    ]
    assert [headers["tracestate"] for headers in arrived] == [TRACESTATE, TRACESTATE]

    # The attempts' log lines name their spans.
    lines = logged.events("attempt")
    assert [(line["trace_id"], line["span_id"]) for line in lines] == [
        (PLATFORM_TRACE, span.span_id) for span in delivered
    ]


def test_spans_hold_no_secret_body_or_header_value_of_an_endpoint(
    collector: Collector,
    hooks: Settings,
    sessions: sessionmaker[Session],
    receiver: Receiver,
) -> None:
    _, secret = add_endpoint(sessions, hooks, receiver.url + "?token=s3cr3t-in-the-query")
    publish_registrations(sessions)
    deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == [("succeeded", 1)])
    spans = collector.wait_for(lambda spans: any(span.name == "record" for span in spans))
    (arrived,) = receiver.received
    told = repr([span.attributes for span in spans])
    for never in (secret, "s3cr3t-in-the-query", "/hooks", arrived.body.decode()[:40]):
        assert never not in told
    assert arrived.headers["traceparent"].startswith("00-")


@pytest.mark.parametrize(
    "traceparent",
    [
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",  # an all-zero trace id is invalid
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",  # upper case is invalid
        "zz",
        "00-" + "a" * 8000,
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\u00e9",
    ],
)
def test_a_bad_traceparent_begins_a_trace_of_its_own(
    collector: Collector, hooks: Settings, sessions: sessionmaker[Session], traceparent: str
) -> None:
    add_endpoint(sessions, hooks, "https://hooks.example/in")
    event_id = _publish(hooks, {b"traceparent": traceparent.encode()})  # as any bytes come
    spans = collector.wait_for(lambda spans: len(spans) == 2)  # the request's, the publish's
    published = _one([span for span in spans if span.name.startswith("publish")])
    assert published.attributes["clubwire.event.id"] == event_id
    served = _one([span for span in spans if span.kind == "SPAN_KIND_SERVER"])
    assert served.parent_id == ""
    assert published.trace_id == served.trace_id != PLATFORM_TRACE
    with sessions() as session:
        stored = session.get_one(Event, event_id).traceparent
    assert stored is not None
    assert stored.split("-")[1] == served.trace_id


@pytest.mark.parametrize("authorization", [b"", b"Bearer not-the-platform-token"])
def test_only_the_platform_continues_its_trace(
    collector: Collector, hooks: Settings, authorization: bytes
) -> None:
    """Whoever reaches the internal API without the platform's token cannot place its
    requests in a trace of its choosing (nor have them sampled)."""
    headers = {b"traceparent": TRACEPARENT.encode()}
    if authorization:
        headers[b"authorization"] = authorization
    with TestClient(create_app(hooks), raise_server_exceptions=False) as client:
        answer = client.post(PUBLISH, json={}, headers=headers)
    assert answer.status_code == 401
    spans = collector.wait_for(lambda spans: len(spans) >= 1)
    served = _one([span for span in spans if span.kind == "SPAN_KIND_SERVER"])
    assert (served.parent_id, served.attributes["http.response.status_code"]) == ("", 401)
    assert served.trace_id != PLATFORM_TRACE


def test_the_club_api_begins_a_trace_of_its_own(
    collector: Collector, hooks: Settings, sessions: sessionmaker[Session]
) -> None:
    """A club's developers are not the platform: their traceparent is not continued."""
    with TestClient(create_app(hooks), raise_server_exceptions=False) as client:
        answer = client.get("/clubs/granite/api/v1/programs", headers={"traceparent": TRACEPARENT})
    assert answer.status_code == 401
    spans = collector.wait_for(lambda spans: len(spans) >= 1)
    served = _one([span for span in spans if span.kind == "SPAN_KIND_SERVER"])
    assert served.name == "GET /clubs/{slug}/api/v1/programs"
    assert (served.parent_id, served.attributes["http.response.status_code"]) == ("", 401)
    assert served.trace_id != PLATFORM_TRACE


@pytest.mark.parametrize("stuck", [True, False], ids=["stuck", "down"])
def test_a_collector_down_or_stuck_costs_no_delivery(
    hooks: Settings,
    sessions: sessionmaker[Session],
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    stuck: bool,
) -> None:
    """Spans past the exporter's small queue are dropped; every delivery arrives, and the
    process stops without waiting for the collector."""
    count = 300
    with collecting(hang=True) as collector:
        if not stuck:
            collector.url = "http://127.0.0.1:9"  # nothing listens there
        small = {"OTEL_BSP_MAX_QUEUE_SIZE": "64", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64"}
        _start(monkeypatch, collector, OTEL_BSP_SCHEDULE_DELAY="10", **small)
        try:
            add_endpoint(sessions, hooks, receiver.url)
            publish_registrations(sessions, count)
            deliver_until(hooks, sessions, lambda: count_settled(sessions) == count, timeout=120)
        finally:
            tracing.stop()
        assert (collector.requests >= 1) is stuck
    assert len(receiver.received) == count
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Attempt)) == count


def test_a_batch_gives_each_event_its_publish_span_in_the_platforms_trace(
    collector: Collector, hooks: Settings, sessions: sessionmaker[Session]
) -> None:
    add_endpoint(sessions, hooks, "https://hooks.example/in")
    batch = [
        {"event": kind, "data": about(kind, seed)}
        for seed, kind in enumerate(["registration.created", "member.updated"] * 2)
    ]
    with TestClient(create_app(hooks), raise_server_exceptions=False) as client:
        answer = client.post(
            f"{PUBLISH}/batch",
            json={"events": batch},
            headers={"authorization": f"Bearer {PLATFORM_TOKEN}", "traceparent": TRACEPARENT},
        )
    assert answer.status_code == 201, answer.text
    spans = collector.wait_for(lambda spans: len(spans) == 1 + len(batch))
    served = _one(_in(PLATFORM_TRACE, spans, "POST /internal/v1/clubs/{slug}/events/batch"))
    published = sorted(
        (span for span in spans if span.name.startswith("publish ")), key=lambda s: s.start_ns
    )
    assert [span.name for span in published] == [f"publish {e['event']}" for e in batch]
    assert [span.attributes["clubwire.event.id"] for span in published] == [
        event["id"] for event in answer.json()["events"]
    ]
    assert {(span.parent_id, span.trace_id) for span in published} == {
        (served.span_id, PLATFORM_TRACE)
    }
