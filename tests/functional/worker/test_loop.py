"""The worker end to end: real TLS receivers, real signatures, DESIGN §6 as a receiver sees it."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors, signing
from clubwire.domain import event_schemas
from clubwire.services import endpoints
from clubwire.services.delivery import attempts, events, pings
from clubwire.settings import Settings
from clubwire.storage.models import Attempt, Club, Delivery, Endpoint, Event, QueueHead
from clubwire.web.app import create_app
from clubwire.worker import lock, loop, running
from tests.conftest import PLATFORM_TOKEN, SECRET_KEY
from tests.factories import EPOCH, FakeClock, make_club, registration
from tests.functional.processes import clubwire, environment
from tests.functional.workers import (
    add_endpoint,
    deliver_until,
    delivery_statuses,
    publish_registrations,
)
from tests.receiver import Authority, Receiver, serving


def test_deliveries_arrive_signed_with_the_spec_headers(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    _, secret = add_endpoint(sessions, hooks, receiver.url)
    event_ids = publish_registrations(sessions, 3)
    deliver_until(
        hooks, sessions, lambda: all(s == "succeeded" for s, _ in delivery_statuses(sessions))
    )
    arrived = receiver.wait_for(3)
    with sessions() as session:
        bodies = {e.id: e.body for e in session.scalars(select(Event))}
        delivery_ids = {d.id for d in session.scalars(select(Delivery))}
    for request in arrived:
        signing.verify(request.body, request.headers["X-Service-Signature"], secret)
        assert request.headers["X-Service-Event"] == "registration.created"
        assert request.headers["X-Service-Delivery"] in delivery_ids
        assert request.headers["User-Agent"] == "Service-Webhooks/1.0"
        assert request.headers["Content-Type"] == "application/json"
    assert sorted(r.body for r in arrived) == sorted(bodies[i] for i in event_ids)
    assert delivery_statuses(sessions) == [("succeeded", 1)] * 3


def test_failures_are_retried_then_dead(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=503) as failing:
        endpoint_id, _ = add_endpoint(sessions, hooks, failing.url)
        publish_registrations(sessions)
        deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == [("dead", 6)])
        arrived = failing.wait_for(6)
    assert len({r.headers["X-Service-Delivery"] for r in arrived}) == 1
    assert len({r.headers["X-Service-Signature"] for r in arrived}) >= 1
    with sessions() as session:
        endpoint = session.get_one(Endpoint, endpoint_id)
        assert (endpoint.dead_in_a_row, endpoint.last_response_code) == (1, 503)


def test_a_retry_after_puts_the_next_attempt_off_as_asked(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    """The schedule's steps are 0 here: without the receiver's ask the worker would try again
    at once."""
    with serving(tls, status=503, answer_headers=[("Retry-After", "120")]) as asking:
        add_endpoint(sessions, hooks, asking.url)
        publish_registrations(sessions)
        deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == [("pending", 1)])
        assert len(asking.received) == 1
    with sessions() as session:
        delivery = session.scalars(select(Delivery)).one()
        attempt = session.scalars(select(Attempt)).one()
    assert (delivery.next_attempt_asked, attempt.retry_after) == (True, "120")
    assert delivery.next_attempt_at is not None
    waited = delivery.next_attempt_at - attempt.started_at
    assert timedelta(seconds=120) <= waited < timedelta(seconds=120 + hooks.attempt_timeout + 1)


def test_a_redirect_is_a_failure_and_never_followed(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=302) as redirecting:
        add_endpoint(sessions, hooks, redirecting.url)
        publish_registrations(sessions)
        deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == [("dead", 6)])
        assert len(redirecting.received) == 6
    with sessions() as session:
        assert session.scalars(select(Delivery)).one().response_code == 302


def test_after_rotation_the_new_secret_signs(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    endpoint_id, old = add_endpoint(sessions, hooks, receiver.url)
    with sessions.begin() as session:
        new = endpoints.rotate_secret(
            session, session.get_one(Endpoint, endpoint_id).club_id, endpoint_id, EPOCH, hooks
        )
    publish_registrations(sessions)
    deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == [("succeeded", 1)])
    (request,) = receiver.wait_for(1)
    signing.verify(request.body, request.headers["X-Service-Signature"], new)
    with pytest.raises(signing.SignatureError):
        signing.verify(request.body, request.headers["X-Service-Signature"], old)


def test_send_test_reports_the_outcome_and_never_counts(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=500) as failing:
        endpoint_id, secret = add_endpoint(sessions, hooks, failing.url)

        async def send() -> object:
            async with attempts.attempter(hooks) as sends:
                with sessions() as session:
                    club_id = session.get_one(Endpoint, endpoint_id).club_id
                return await pings.send_test(hooks, sessions, sends, club_id, endpoint_id)

        result = asyncio.run(send())
        (request,) = failing.wait_for(1)
    assert (result.ok, result.response_code) == (False, 500)  # type: ignore[attr-defined]
    assert request.headers["X-Service-Event"] == "ping"
    signing.verify(request.body, request.headers["X-Service-Signature"], secret)
    assert orjson.loads(request.body)["data"] == event_schemas.example("ping")["data"]
    with sessions() as session:
        endpoint = session.get_one(Endpoint, endpoint_id)
        # A Send test is no delivery: not counted, and not the endpoint's last delivery.
        assert (endpoint.dead_in_a_row, endpoint.last_delivery_at) == (0, None)
        assert endpoint.last_response_code is None


def test_a_slow_endpoint_does_not_starve_the_others(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority, receiver: Receiver
) -> None:
    narrow = hooks.model_copy(
        update={"max_in_flight": 8, "max_in_flight_per_endpoint": 2, "attempt_timeout": 5.0}
    )
    with serving(tls, hang=True) as silent:
        add_endpoint(sessions, narrow, silent.url)
        healthy_id, _ = add_endpoint(sessions, narrow, receiver.url)
        publish_registrations(sessions, 20)

        silent_when_healthy_done: list[int] = []

        def healthy_done() -> bool:
            with sessions() as session:
                rows = session.scalars(
                    select(Delivery).where(Delivery.endpoint_id == healthy_id)
                ).all()
            done = all(d.status == "succeeded" for d in rows)
            if done:
                silent_when_healthy_done.append(len(silent.received))
            return done

        deliver_until(narrow, sessions, healthy_done)
        # All 20 healthy deliveries went through while the silent endpoint held no more than
        # its per-endpoint limit of attempts.
        assert silent_when_healthy_done[0] <= 2
    receiver.wait_for(20)


def test_a_backlog_deeper_than_its_lane_is_delivered_in_full(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    narrow = hooks.model_copy(update={"max_in_flight_per_endpoint": 2})  # a lane holds 6
    add_endpoint(sessions, narrow, receiver.url)
    publish_registrations(sessions, 25)
    deliver_until(
        narrow, sessions, lambda: {s for s, _ in delivery_statuses(sessions)} == {"succeeded"}
    )
    assert delivery_statuses(sessions) == [("succeeded", 1)] * 25
    assert len({r.headers["X-Service-Delivery"] for r in receiver.wait_for(25)}) == 25


def test_more_endpoints_than_the_worker_holds_are_all_served(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    # Two attempts at once and six jobs held in all: the endpoints take turns.
    small = hooks.model_copy(update={"max_in_flight": 2, "max_in_flight_per_endpoint": 1})
    for number in range(6):
        add_endpoint(sessions, small, f"{receiver.url}?endpoint={number}")
    publish_registrations(sessions, 4)
    deliver_until(
        small, sessions, lambda: {s for s, _ in delivery_statuses(sessions)} == {"succeeded"}
    )
    assert delivery_statuses(sessions) == [("succeeded", 1)] * 24


def test_a_waiting_job_whose_lease_ran_short_is_claimed_afresh_before_it_is_sent(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    one = hooks.model_copy(update={"max_in_flight_per_endpoint": 1})  # one sent, two waiting
    clock = FakeClock()
    with serving(tls, hang=True) as silent:
        add_endpoint(sessions, one, silent.url)
        publish_registrations(sessions, 2)

        async def until(count: int) -> None:
            for _ in range(250):
                if len(silent.received) >= count:
                    return
                await asyncio.sleep(0.02)
            raise AssertionError(f"the receiver did not get {count} requests")

        def lease_of(delivery_id: str) -> datetime | None:
            with sessions() as session:
                endpoint_id = session.get_one(Delivery, delivery_id).endpoint_id
                return session.get_one(QueueHead, endpoint_id).lease_until

        async def run() -> datetime | None:
            async with running.running(one, sessions, clock):
                await until(1)
                # The second job waits behind the first, which hangs until its deadline;
                # by then its lease has 1 s left, less than an attempt may take.
                clock.advance(seconds=29)
                await until(2)
                second = silent.received[1].headers["X-Service-Delivery"]
                return await asyncio.to_thread(lease_of, second)

        lease_while_sent = asyncio.run(run())
    # It was given back and its lane leased afresh (30 s from the new time) before it was sent.
    assert lease_while_sent == clock.now + timedelta(seconds=30)


def test_an_endpoint_with_a_max_rate_is_sent_no_faster(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    """Max rate 5 a second: twelve deliveries start at least 0.2 s apart, so they take at
    least 2.2 s however many the worker could send at once; another endpoint of the same
    club is not held back by it. The starts are what the engine paces (as recorded on each
    attempt): arrivals also carry the receiver's connection set-up, which on a busy machine
    took 0.7 s and let four paced starts arrive together."""
    with sessions.begin() as session:
        club = make_club(session)
        paced_id, free_id = (
            endpoints.create_endpoint(
                session, club, receiver.url, ["registration.created"], EPOCH, hooks, max_rate=rate
            )[0].id
            for rate in (5, None)
        )
    publish_registrations(sessions, 12)
    deliver_until(
        hooks, sessions, lambda: {s for s, _ in delivery_statuses(sessions)} == {"succeeded"}
    )
    assert len(receiver.wait_for(24)) == 24
    with sessions() as session:
        starts = session.execute(
            select(Delivery.endpoint_id, Attempt.started_at).join(
                Attempt, Attempt.delivery_id == Delivery.id
            )
        ).all()
    paced = sorted(at.timestamp() for endpoint_id, at in starts if endpoint_id == paced_id)
    free = sorted(at.timestamp() for endpoint_id, at in starts if endpoint_id == free_id)
    assert len(paced) == len(free) == 12
    # Any six in a row span a second (five gaps); the event loop may wake a little early.
    spans = [paced[n + 5] - paced[n] for n in range(len(paced) - 5)]
    assert min(spans) >= 0.95, spans
    assert paced[-1] - paced[0] >= 2.1
    assert free[-1] - free[0] < paced[-1] - paced[0]


def test_nothing_is_delivered_while_the_module_is_off(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    add_endpoint(sessions, hooks, receiver.url)
    with sessions.begin() as session:
        club = session.scalars(select(Club)).one()
        events.publish(session, club, "registration.created", registration(), EPOCH)
        club.webhooks_enabled = False  # switched off behind the service's back: the worker checks
    deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == [("skipped", 0)])
    assert receiver.received == []


def test_on_sqlite_a_second_worker_refuses_to_start(hooks: Settings) -> None:
    if not hooks.is_sqlite:
        pytest.skip("any number of workers run side by side on PostgreSQL")
    with (
        lock.single_worker(hooks),
        pytest.raises(errors.AlreadyRunning, match="exactly one"),
        lock.single_worker(hooks),
    ):
        pass


@pytest.mark.slow
def test_worker_is_a_first_command_on_a_fresh_sqlite_home(tmp_path: Path) -> None:
    """No folder, no database, a key from the environment: the worker makes what it needs."""
    home = tmp_path / "new" / "home"
    env = environment(home, CLUBWIRE_SECRET_KEY=SECRET_KEY)
    with clubwire(tmp_path, env, "worker") as worker:
        worker.until(lambda err: "delivering webhooks" in err, "worker start", stream="err")
        assert worker.interrupt() == 0
    assert (home / "clubwire.db").is_file()
    assert "Traceback" not in worker.err


def test_an_idle_worker_is_woken_by_a_publish_elsewhere(
    sessions: sessionmaker[Session],
    hooks: Settings,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Idle, the worker does not poll: a publish on another connection wakes it (NOTIFY on
    PostgreSQL, the database file's data version on SQLite), once and again."""
    monkeypatch.setattr(loop, "SAFETY_POLL", 3600.0)  # nothing else would wake it
    add_endpoint(sessions, hooks, receiver.url)

    async def run() -> None:
        async with running.running(hooks, sessions):
            for count in (1, 2):
                await asyncio.sleep(0.5)  # the worker is idle, listening
                await asyncio.to_thread(publish_registrations, sessions)
                await asyncio.to_thread(receiver.wait_for, count, 10.0)

    asyncio.run(run())


def test_the_app_delivers_in_process_when_asked(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    """``serve`` on SQLite: the app runs a worker, and a publish through the API wakes it."""
    _, secret = add_endpoint(sessions, hooks, receiver.url)
    with TestClient(create_app(hooks, run_worker=True)) as client:
        response = client.post(
            "/internal/v1/clubs/granite/events",
            json={"event": "registration.created", "data": registration()},
            headers={"Authorization": f"Bearer {PLATFORM_TOKEN}"},
        )
        assert response.status_code == 201
        (request,) = receiver.wait_for(1)
    assert orjson.loads(request.body)["id"] == response.json()["id"]
    signing.verify(request.body, request.headers["X-Service-Signature"], secret)
