"""Deliveries as a replay finds them: of a past moment, finished in a given way."""

from __future__ import annotations

import random
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from clubwire.domain import event_catalog
from clubwire.domain.delivering import Status
from clubwire.services.delivery import events
from clubwire.storage import queue
from clubwire.storage.models import Club, Delivery, Endpoint


def make_delivery(
    session: Session,
    club: Club,
    endpoint: Endpoint,
    created: datetime,
    status: Status = Status.DEAD,
    kind: str = "registration.created",
) -> str:
    """A delivery of a new ``kind`` event, created at ``created``, finished as ``status``
    (``pending``: still due)."""
    data = event_catalog.sample(kind, created, random.Random(1))
    payload = event_catalog.validate(kind, data)
    event = events.record_event(session, club, kind, payload, created)
    events.fan_out(session, event, [endpoint], created)
    finished = status is not Status.PENDING
    session.execute(
        update(Delivery)
        .where(Delivery.event_id == event.id)
        .values(status=status, next_attempt_at=None if finished else created)
    )
    connection = session.connection()
    queue.on(connection).refresh(connection, [endpoint.id])
    return session.scalars(select(Delivery.id).where(Delivery.event_id == event.id)).one()
