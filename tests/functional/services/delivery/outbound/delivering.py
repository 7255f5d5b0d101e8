"""A real worker on the test database, delivering to the harness's receivers in its event loop.

For the tests of what the worker records whatever a receiver answers: clubs and endpoints
made with the factories, a worker run until the database says it is done, and what the
receivers and the database saw afterwards.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Attempt, Club, Delivery
from clubwire.worker import running
from tests.factories import EPOCH, make_club, make_endpoint, registration
from tests.functional.services.delivery.outbound.harness import (
    Handler,
    Reader,
    Receiver,
    Tls,
    Writer,
)

KIND = "registration.created"


def worker_settings(settings: Settings, tls: Tls) -> Settings:
    """Local receivers trusted, one retry at once (so a failing delivery dies at its second
    attempt), a lease long enough that nothing is sent again by its running out."""
    return settings.model_copy(
        update={
            "allow_private_targets": True,
            "ca_bundle": tls.ca_bundle,
            "retry_schedule": (0,),
            "attempt_timeout": 2.0,
            "connect_timeout": 1.0,
            "lease_seconds": 30.0,
        }
    )


def raw(answer: bytes) -> Handler:
    """Answers every request on the connection with exactly these bytes, which may be what
    no HTTP server would send."""

    async def handler(receiver: Receiver, reader: Reader, writer: Writer) -> None:
        while await receiver.read_request(reader) is not None:
            writer.write(answer)
            await writer.drain()

    return handler


def endpoint(sessions: sessionmaker[Session], settings: Settings, url: str, slug: str) -> str:
    """An endpoint of the club ``slug`` (made if need be) for ``KIND``; its id."""
    with sessions.begin() as session:
        club = session.scalar(select(Club).where(Club.slug == slug)) or make_club(session, slug)
        made, _ = make_endpoint(session, club, settings, url, (KIND,))
        return made.id


def publish(sessions: sessionmaker[Session], slug: str, count: int = 1) -> None:
    with sessions.begin() as session:
        club = session.scalars(select(Club).where(Club.slug == slug)).one()
        for _ in range(count):
            events.publish(session, club, KIND, registration(), EPOCH)


def deliveries(sessions: sessionmaker[Session], endpoint_id: str) -> list[Delivery]:
    with sessions() as session:
        found = select(Delivery).where(Delivery.endpoint_id == endpoint_id)
        return list(session.scalars(found.order_by(Delivery.id)))


def attempts(sessions: sessionmaker[Session], delivery_id: str) -> list[Attempt]:
    with sessions() as session:
        found = select(Attempt).where(Attempt.delivery_id == delivery_id)
        return list(session.scalars(found.order_by(Attempt.id)))


def settled(sessions: sessionmaker[Session], endpoint_id: str, status: str) -> bool:
    """Whether every delivery to the endpoint has that status (and there is one)."""
    found = deliveries(sessions, endpoint_id)
    return bool(found) and all(delivery.status == status for delivery in found)


def hits(receiver: Receiver) -> Counter[str | None]:
    """How many times each delivery (by its id) reached the receiver."""
    return Counter(request.header("X-Service-Delivery") for request in receiver.requests)


async def deliver_until(
    settings: Settings,
    sessions: sessionmaker[Session],
    done: Callable[[], bool],
    timeout: float = 20.0,
) -> None:
    """Run a worker in this event loop until ``done()`` holds (asked between short waits)."""
    async with running.running(settings, sessions):
        for _ in range(int(timeout / 0.02)):
            if await asyncio.to_thread(done):
                return
            await asyncio.sleep(0.02)
    raise AssertionError("the worker did not get there in time")
