"""Deliveries in the Webhooks tab: Send test to a real TLS receiver, Retry, attempts."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire import signing
from clubwire.domain import timestamps
from clubwire.domain.delivering import Status, Trigger
from clubwire.services import clubs
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Attempt, Delivery, Endpoint
from tests.factories import (
    EPOCH,
    FakeClock,
    make_club,
    make_endpoint,
    make_staff,
    receiver_settings,
    registration,
)
from tests.functional.ui_pages import Browser, browser, part
from tests.functional.workers import attempt_once
from tests.receiver import Authority, serving

ADMIN = "admin@granite.example"
TAB = "/settings/granite/webhooks"
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def hooks(settings: Settings, tls: Authority) -> Settings:
    """Local receivers allowed, the test CA trusted, short deadlines."""
    return receiver_settings(
        settings, ca_bundle=tls.bundle, attempt_timeout=2.0, connect_timeout=1.0
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def web(hooks: Settings, sessions: sessionmaker[Session], clock: FakeClock) -> Iterator[Browser]:
    with sessions.begin() as session:
        make_club(session, "granite")
        make_club(session, "rocks")
    make_staff(sessions, ADMIN, clubs=["granite"])
    with browser(hooks, clock) as web:
        web.sign_in(ADMIN)
        web.get(TAB)
        yield web


def _endpoint(sessions: sessionmaker[Session], hooks: Settings, url: str, slug: str) -> str:
    with sessions.begin() as session:
        endpoint, _ = make_endpoint(session, clubs.get_club(session, slug), hooks, url)
        return endpoint.id


def _dead_delivery(sessions: sessionmaker[Session], hooks: Settings, slug: str) -> Delivery:
    """An endpoint of the club with one delivery that has died."""
    _endpoint(sessions, hooks, "https://127.0.0.1:9/hooks", slug)
    with sessions.begin() as session:
        club = clubs.get_club(session, slug)
        events.publish(session, club, "registration.created", registration(), EPOCH)
        session.execute(
            update(Delivery)
            .where(Delivery.club_id == club.id)
            .values(status=Status.DEAD, attempt=6, next_attempt_at=None, response_code=503)
        )
        return session.scalars(select(Delivery).where(Delivery.club_id == club.id)).one()


def _delivery(sessions: sessionmaker[Session], delivery_id: str) -> Delivery:
    with sessions() as session:
        return session.get_one(Delivery, delivery_id)


def test_send_test_shows_the_receivers_code_and_time(
    web: Browser, sessions: sessionmaker[Session], tls: Authority
) -> None:
    with serving(tls) as receiver:
        created = web.submit(TAB, {"url": receiver.url, "event": ["registration.created"]})
        (secret,) = re.findall(r"whsec_\w+", created.text)
        with sessions() as session:
            endpoint_id = session.scalars(select(Endpoint.id)).one()
        response = web.submit(f"{TAB}/{endpoint_id}/test")
        (request,) = receiver.wait_for(1)
    outcome = re.search(r'ok" id="endpoint-[^"]+-test">Send test: (.*?)</p>', response.text)
    assert outcome is not None
    assert re.fullmatch(r"200 in \d+ ms", outcome.group(1))
    signing.verify(
        request.body, request.headers["X-Service-Signature"], secret, now=EPOCH.timestamp()
    )
    assert request.headers["X-Service-Event"] == "ping"
    recent = response.text.split("Recent deliveries")[1]
    assert re.search(r'<td class="status test ok">Test: 200 in \d+ ms</td>', recent)
    assert "succeeded" not in recent


def test_a_failed_send_test_shows_as_a_test_and_is_no_last_delivery(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=500) as failing:
        endpoint_id = _endpoint(sessions, hooks, failing.url, "granite")
        web.post(f"{TAB}/{endpoint_id}/test")
    with sessions() as session:
        (ping,) = session.scalars(select(Delivery.id).where(Delivery.endpoint_id == endpoint_id))
    page = web.get(TAB).text
    row = part(page, f'id="delivery-{ping}"')
    assert re.search(r">Test failed: the receiver answered 500 \(after \d+ ms\)</td>", row)
    assert ">dead<" not in row
    assert f'id="retry-{ping}"' not in row
    assert re.search(r"<dt>Last delivery</dt>\s*<dd>never</dd>", page)
    assert re.search(r"<dt>Dead in a row</dt><dd>0 of 5</dd>", page)
    detail = web.get(f"/settings/granite/deliveries/{ping}").text
    assert '<dd class="status test" id="test-outcome">Test failed</dd>' in detail
    assert ">dead<" not in detail
    every = part(web.get(f"{TAB}/{endpoint_id}/deliveries").text, f'id="delivery-{ping}"')
    assert re.search(r">Test failed: the receiver answered 500 \(after \d+ ms\)</td>", every)
    assert ">dead<" not in every


def test_send_test_says_what_went_wrong_in_plain_words(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=500) as failing:
        endpoint_id = _endpoint(sessions, hooks, failing.url, "granite")
        response = web.submit(f"{TAB}/{endpoint_id}/test")
    assert re.search(
        r"Send test: failed: the receiver answered 500 \(after \d+ ms\)", response.text
    )
    with sessions() as session:
        assert session.scalars(select(Endpoint.dead_in_a_row)).one() == 0


def test_a_send_test_answered_410_says_so_and_switches_nothing_off(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=410) as gone:
        endpoint_id = _endpoint(sessions, hooks, gone.url, "granite")
        response = web.submit(f"{TAB}/{endpoint_id}/test")
    said = "the receiver answered 410 Gone: it wants no more webhooks, and a delivery answered "
    said += "so switches the endpoint off; a test switches nothing off"
    assert re.search(rf"Send test: failed: {said} \(after \d+ ms\)</p>", response.text)
    assert re.search(rf'<td class="status test failed">Test failed: {said} \(after', response.text)
    with sessions() as session:
        endpoint = session.get_one(Endpoint, endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.dead_in_a_row) == (True, None, 0)
    assert 'aria-checked="true"' in part(response.text, f'id="endpoint-{endpoint_id}"', "</form>")


def test_each_delivery_names_its_event_and_a_send_test_offers_no_retry(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    dead = _dead_delivery(sessions, hooks, "granite")
    with serving(tls) as receiver:
        endpoint_id = _endpoint(sessions, hooks, receiver.url, "granite")
        page = web.submit(f"{TAB}/{endpoint_id}/test").text
    with sessions() as session:
        (ping,) = session.scalars(select(Delivery.id).where(Delivery.endpoint_id == endpoint_id))
    tested = part(page, f'id="delivery-{ping}"')
    assert "<code>ping</code>" in tested
    assert f'id="retry-{ping}"' not in tested
    retried = part(page, f'id="delivery-{dead.id}"')
    assert "<code>registration.created</code>" in retried
    assert f'id="retry-{dead.id}"' in retried
    detail = web.get(f"/settings/granite/deliveries/{ping}").text
    assert "A Send test is not retried" in detail
    assert f"/deliveries/{ping}/retry" not in detail


def test_retry_brings_a_delivery_back_now(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings, clock: FakeClock
) -> None:
    dead = _dead_delivery(sessions, hooks, "granite")
    row = part(web.get(TAB).text, f'id="delivery-{dead.id}"')
    assert ">dead<" in row
    assert '<td data-label="Response code">503</td>' in row
    assert '<td data-label="Attempt">6</td>' in row
    clock.advance(minutes=5)
    response = web.post(f"/settings/granite/deliveries/{dead.id}/retry", {"next": TAB})
    assert (response.status_code, response.headers["location"]) == (303, TAB)
    retried = _delivery(sessions, dead.id)
    assert retried.next_attempt_at == clock.now
    assert retried.next_trigger == Trigger.MANUAL


def test_retry_goes_back_only_to_this_clubs_pages(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings
) -> None:
    dead = _dead_delivery(sessions, hooks, "granite")
    url = f"/settings/granite/deliveries/{dead.id}/retry"
    fallback = f"{TAB}#endpoint-{dead.endpoint_id}"
    for elsewhere in ("https://evil.example/", "//evil.example", "/settings/rocks/webhooks"):
        assert web.post(url, {"next": elsewhere}).headers["location"] == fallback


def _attempt(
    delivery_id: str, number: int, trigger: str, duration_ms: int, **outcome: object
) -> Attempt:
    return Attempt(
        delivery_id=delivery_id,
        number=number,
        trigger=trigger,
        started_at=EPOCH,
        duration_ms=duration_ms,
        **{"excerpt": "", **outcome},
    )


def test_a_delivery_shows_its_attempts_with_the_response_escaped(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings
) -> None:
    dead = _dead_delivery(sessions, hooks, "granite")
    with sessions.begin() as session:
        session.add(_attempt(dead.id, 1, "scheduled", 41, response_code=503, excerpt=HOSTILE))
        session.add(_attempt(dead.id, 2, "manual", 3, error="connection refused"))
    page = web.get(f"/settings/granite/deliveries/{dead.id}")
    assert page.status_code == 200
    assert HOSTILE not in page.text
    assert '<pre class="excerpt">&lt;script&gt;alert(1)&lt;/script&gt;</pre>' in page.text
    rows = page.text.split("<tbody>")[1].split("</tr>")
    assert all(cell in rows[0] for cell in (">1</th>", "scheduled", ">503<", "41 ms"))
    assert all(cell in rows[1] for cell in (">2</th>", "manual", "connection refused", "3 ms"))
    assert f'name="next" value="/settings/granite/deliveries/{dead.id}"' in page.text
    assert (
        '<a id="tab-webhooks" href="/settings/granite/webhooks" aria-current="page">' in page.text
    )


def test_another_clubs_delivery_is_not_found_and_not_retried(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings
) -> None:
    theirs = _dead_delivery(sessions, hooks, "rocks")
    assert web.get(f"/settings/granite/deliveries/{theirs.id}").status_code == 404
    assert web.post(f"/settings/granite/deliveries/{theirs.id}/retry").status_code == 404
    assert web.post(f"/settings/rocks/deliveries/{theirs.id}/retry").status_code == 404
    assert _delivery(sessions, theirs.id).next_attempt_at is None


def test_retry_on_a_switched_off_endpoint_says_why(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings
) -> None:
    dead = _dead_delivery(sessions, hooks, "granite")
    web.post(f"{TAB}/{dead.endpoint_id}/disable")
    assert "Retry" not in part(
        web.get(f"/settings/granite/deliveries/{dead.id}").text, "<main", "</main>"
    )
    response = web.post(f"/settings/granite/deliveries/{dead.id}/retry")
    assert response.status_code == 422
    assert "The endpoint is switched off: switch it on first." in response.text
    assert _delivery(sessions, dead.id).next_attempt_at is None


def _answered(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority, retry_after: str
) -> tuple[str, str]:
    """Granite's endpoint at a receiver that answers 503 with ``retry_after``, and its one
    delivery, attempted once at ``EPOCH``; their ids."""
    with serving(tls, status=503, answer_headers=[("Retry-After", retry_after)]) as failing:
        endpoint_id = _endpoint(sessions, hooks, failing.url, "granite")
        with sessions.begin() as session:
            club = clubs.get_club(session, "granite")
            events.publish(session, club, "registration.created", registration(), EPOCH)
        # Deadlines a busy machine stays inside: the receiver's answer is what is shown.
        patient = hooks.model_copy(update={"attempt_timeout": 20.0, "connect_timeout": 10.0})
        result = attempt_once(sessions, patient, EPOCH)
    return endpoint_id, result.job.delivery_id


def test_the_pages_say_when_the_receiver_asked_to_wait(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    endpoint_id, delivery_id = _answered(sessions, hooks, tls, "3600")
    said = (
        'the receiver asked to wait until <time datetime="2026-01-05T13:00:00.000Z">'
        "2026-01-05 13:00:00 UTC</time>"
    )
    row = f'id="delivery-{delivery_id}"'
    assert f'<td data-label="Next attempt">{said}</td>' in part(web.get(TAB).text, row)
    listed = web.get(f"{TAB}/{endpoint_id}/deliveries").text
    assert f'<td data-label="Next attempt">{said}</td>' in part(listed, row)
    page = web.get(f"/settings/granite/deliveries/{delivery_id}").text
    assert f'<dd id="next-attempt">{said}</dd>' in page
    assert '<td data-label="Retry-After"><code>3600</code></td>' in page


def test_a_retry_after_that_asks_nothing_shows_as_it_came_and_the_schedule_stands(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    endpoint_id, delivery_id = _answered(sessions, hooks, tls, HOSTILE)
    page = web.get(f"/settings/granite/deliveries/{delivery_id}").text
    assert HOSTILE not in page
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert f'<td data-label="Retry-After"><code>{escaped}</code></td>' in page
    due = _delivery(sessions, delivery_id).next_attempt_at
    assert due is not None
    assert f'<dd id="next-attempt"><time datetime="{timestamps.to_wire(due)}">' in page
    listed = web.get(f"{TAB}/{endpoint_id}/deliveries").text
    assert "asked to wait" not in listed
