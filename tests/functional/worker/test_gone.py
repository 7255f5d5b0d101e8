"""410 Gone as a real TLS receiver answers it to a real worker: the endpoint is switched off at
once, also by a Retry of a finished delivery; a Send test answered so switches nothing off.
The email it brings: ``services/mail/test_failure_emails.py``."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import delivering, timestamps
from clubwire.services import endpoints
from clubwire.services.delivery import attempts, deliveries, pings
from clubwire.settings import Settings
from clubwire.storage.models import Delivery, Endpoint
from tests.functional.workers import (
    add_endpoint,
    deliver_until,
    delivery_statuses,
    publish_registrations,
)
from tests.receiver import Authority, serving


def _endpoint(sessions: sessionmaker[Session], endpoint_id: str) -> Endpoint:
    with sessions() as session:
        return session.get_one(Endpoint, endpoint_id)


def test_a_410_kills_the_delivery_and_switches_its_endpoint_off_skipping_what_waits(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=410) as gone:
        endpoint_id, _ = add_endpoint(sessions, hooks, gone.url)
        tomorrow = timestamps.utc_now() + timedelta(days=1)
        publish_registrations(sessions, at=tomorrow)  # still waiting at the switch-off
        publish_registrations(sessions)
        deliver_until(hooks, sessions, lambda: not _endpoint(sessions, endpoint_id).enabled)
    assert len(gone.received) == 1
    assert sorted(delivery_statuses(sessions)) == [("dead", 1), ("skipped", 0)]
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.disabled_reason, endpoint.dead_in_a_row) == ("gone", 1)
    assert endpoint.last_response_code == delivering.GONE
    with sessions.begin() as session:
        endpoints.enable_endpoint(session, endpoint.club_id, endpoint_id, timestamps.utc_now())
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.dead_in_a_row) == (True, None, 0)


def test_a_retry_of_a_dead_delivery_answered_410_switches_off_and_leaves_it_dead(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=503) as receiver:
        endpoint_id, _ = add_endpoint(sessions, hooks, receiver.url)
        publish_registrations(sessions)
        deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == [("dead", 6)])
        receiver.status = delivering.GONE
        with sessions.begin() as session:
            dead = session.scalars(select(Delivery)).one()
            deliveries.retry(session, dead.club_id, dead.id, timestamps.utc_now())
        deliver_until(hooks, sessions, lambda: not _endpoint(sessions, endpoint_id).enabled)
        receiver.wait_for(7)
    assert delivery_statuses(sessions) == [("dead", 7)]
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.disabled_reason, endpoint.dead_in_a_row) == ("gone", 1)


def test_a_send_test_answered_410_says_so_and_switches_nothing_off(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=410) as gone:
        endpoint_id, _ = add_endpoint(sessions, hooks, gone.url)
        club_id = _endpoint(sessions, endpoint_id).club_id

        async def send() -> delivering.Result:
            async with attempts.attempter(hooks) as sends:
                return await pings.send_test(hooks, sessions, sends, club_id, endpoint_id)

        result = asyncio.run(send())
    assert (result.ok, result.response_code) == (False, delivering.GONE)
    assert pings.plain(result).startswith("failed: the receiver answered 410 Gone: ")
    assert "a test switches nothing off" in pings.plain(result)
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.dead_in_a_row) == (True, None, 0)
