"""Deliveries carry Standard Webhooks headers beside ours (issue 14, item 2): a real worker
sends to a real TLS receiver, and what arrived verifies with the ``standardwebhooks`` package
and with Stripe's verifier, on every kind of attempt (first, retried, manual, Send test)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

import pytest
import standardwebhooks
import stripe
from aiohttp import web
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import receiving, signing
from clubwire.services import endpoints
from clubwire.services.delivery import attempts, deliveries, pings
from clubwire.settings import Settings
from clubwire.storage.models import Delivery, Endpoint
from clubwire.worker.running import running
from tests.factories import EPOCH
from tests.functional.workers import (
    add_endpoint,
    deliver_until,
    delivery_statuses,
    publish_registrations,
)
from tests.receiver import Authority, Received, Receiver, serving


def verified(request: Received, secret: str) -> str:
    """The event id of ``request``, once both schemes verified it; fails the test if not."""
    event = standardwebhooks.Webhook(secret).verify(request.body, request.headers)
    header = request.headers["X-Service-Signature"]
    assert stripe.WebhookSignature.verify_header(request.body, header, secret, 300)
    signed_at = signing.verify(request.body, header, secret)
    assert request.headers["webhook-timestamp"] == str(signed_at)
    assert request.headers["webhook-id"] == event["id"]
    return str(event["id"])


REJECTED = (
    standardwebhooks.WebhookVerificationError,
    stripe.SignatureVerificationError,
    signing.SignatureError,
    AssertionError,  # the headers disagree
)


class VerifyingReceiver(receiving.Receiver):
    """Answers 204 to a delivery that both schemes verify, 400 to any other."""

    def __init__(self, secret: str) -> None:
        super().__init__(secret, lambda _: None)
        self.secret = secret
        self.verified: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        arrived = Received(dict(request.headers), await request.read(), 0.0)
        try:
            self.verified.append(verified(arrived, self.secret))
        except REJECTED as exc:
            return web.Response(status=400, text=str(exc))
        return web.Response(status=204)


def test_a_receiver_that_verifies_both_schemes_accepts_every_delivery(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with contextlib.closing(receiving.bind("127.0.0.1", 0)) as listening:
        _, secret = add_endpoint(sessions, hooks, receiving.url_of(listening, "/hooks"))
        event_ids = publish_registrations(sessions, 3)
        receiver = VerifyingReceiver(secret)

        def delivered() -> bool:
            return delivery_statuses(sessions) == [("succeeded", 1)] * 3

        async def deliver() -> None:
            async with receiving.serving(receiver, tls, listening), running(hooks, sessions):
                while not await asyncio.to_thread(delivered):
                    await asyncio.sleep(0.02)

        asyncio.run(asyncio.wait_for(deliver(), 20))
    assert sorted(receiver.verified) == sorted(event_ids)


def test_retries_and_a_manual_retry_keep_the_id_and_are_signed_afresh(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=503) as failing:
        endpoint_id, secret = add_endpoint(sessions, hooks, failing.url)
        (event_id,) = publish_registrations(sessions)
        deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == [("dead", 6)])
        with sessions.begin() as session:
            delivery = session.scalars(select(Delivery)).one()
            club_id = session.get_one(Endpoint, endpoint_id).club_id
            deliveries.retry(session, club_id, delivery.id, datetime.now(UTC))
        deliver_until(hooks, sessions, lambda: len(failing.received) == 7)
        arrived = failing.wait_for(7)
    assert [verified(request, secret) for request in arrived] == [event_id] * 7


def test_send_test_and_a_rotated_secret(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    endpoint_id, old = add_endpoint(sessions, hooks, receiver.url)
    with sessions.begin() as session:
        club_id = session.get_one(Endpoint, endpoint_id).club_id
        new = endpoints.rotate_secret(session, club_id, endpoint_id, EPOCH, hooks)

    async def send() -> None:
        async with attempts.attempter(hooks) as sends:
            await pings.send_test(hooks, sessions, sends, club_id, endpoint_id)

    asyncio.run(send())
    (ping,) = receiver.wait_for(1)
    assert ping.headers["X-Service-Event"] == "ping"
    assert verified(ping, new).startswith("evt_")
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(old).verify(ping.body, ping.headers)
