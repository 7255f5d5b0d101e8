"""The worker's first database steps: lease the lanes of endpoints with due deliveries, read
each lane's jobs, give lanes back; and Send test's job (ADR 0008).

A worker leases a lane (the endpoint's queue head) for longer than an attempt may take and
renews the lease once half spent; it writes no delivery until it records an attempt. A
worker that dies leaves its leases to run out, and the deliveries it had not recorded are
claimed again (at least once).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors, ids
from clubwire.domain import event_catalog, trace_context
from clubwire.domain.delivering import Job, Status, Trigger
from clubwire.services import endpoints
from clubwire.services.delivery import events
from clubwire.storage import database, queue
from clubwire.storage.models import Club, Delivery
from clubwire.storage.queue import Claimed, LeasedLane, Link, Want


def take_lanes(
    session: Session,
    now: datetime,
    until: datetime,
    token: str,
    lanes: int,
    named: Collection[str] | None = None,
    held: Collection[str] = (),
) -> list[LeasedLane]:
    """Lease up to ``lanes`` lanes with due deliveries (of the ``named`` endpoints only, if
    given) and renew the ``held`` ones, all until ``until`` under the worker's ``token``;
    the lanes leased (the longest waiting first) or still held. A lane whose endpoint or
    club module went off is given back at once, its waiting deliveries skipped."""
    connection = session.connection()
    deliveries = queue.on(connection)
    # The heads to renew, and those a wake-up named, are locked first, in one statement, in
    # the endpoints' order, waiting for the publishes that hold them: a named head is due,
    # and taking it with SKIP LOCKED skipped it while any publish held it, which during a
    # burst to its club is nearly always (issue 31). Nothing after that waits for a head
    # (taking any others skips those held), so no publish and worker each hold one the
    # other waits for.
    deliveries.lock(connection, {*held, *(named or ())})
    kept = deliveries.renew(connection, held, token, until)
    taken = deliveries.take(connection, now, until, token, lanes, named) if lanes > 0 else []
    described = {lane.endpoint_id: lane for lane in deliveries.lanes(connection, {*taken, *kept})}
    found = [described[endpoint_id] for endpoint_id in dict.fromkeys([*taken, *kept])]
    closed = [lane.endpoint_id for lane in found if not lane.open]
    if closed:
        endpoints.skip_waiting(session, Delivery.endpoint_id.in_(closed), now)
        deliveries.give_back(connection, closed, token, now)
    return [lane for lane in found if lane.open]


def claim(session: Session, now: datetime, token: str, wants: Mapping[str, Want]) -> Claimed:
    """Each wanted lane's due deliveries as its ``Want`` says, oldest first, as jobs under
    the lane's lease, and where each lane's claims have now reached: nothing is written."""
    connection = session.connection()
    return queue.on(connection).jobs(connection, now, wants, token)


def give_back(session: Session, endpoint_ids: Sequence[str], token: str, now: datetime) -> None:
    """End the worker's leases of these lanes; their heads say when each is next due (those
    with deliveries still due queue behind the lanes that waited meanwhile)."""
    connection = session.connection()
    queue.on(connection).give_back(connection, endpoint_ids, token, now)


def next_due(session: Session, now: datetime) -> datetime | None:
    """When the earliest lane is due, or a leased one's lease runs out: how long an idle
    worker may sleep."""
    connection = session.connection()
    return queue.on(connection).next_due(connection, now)


def link(sessions: sessionmaker[Session]) -> Link:
    """The worker's way to the queue: where its statements run, their sessions, and its
    wake-up (``NOTIFY`` on PostgreSQL, another connection's commit on SQLite)."""
    return queue.of(database.url_of(sessions).get_backend_name()).link(sessions)


def create_test_job(
    session: Session, club: Club, endpoint_id: str, now: datetime, lease: timedelta
) -> Job:
    """A ``ping`` to one endpoint for the caller to send at once (Send test): no worker sees
    it, as it is never due.

    Its data is the catalog's ``ping`` sample, the very one the receivers' guide shows."""
    if not club.webhooks_enabled:
        raise errors.InvalidInput("Webhooks & API are not enabled for this club.")
    endpoint = endpoints.get_endpoint(session, club.id, endpoint_id)
    payload = event_catalog.validate(
        event_catalog.PING, event_catalog.sample(event_catalog.PING, now)
    )
    event = events.record_event(session, club, event_catalog.PING, payload, now)
    delivery = Delivery(
        id=ids.new_sorted_id("dlv", now),
        club_id=club.id,
        event_id=event.id,
        endpoint_id=endpoint.id,
        status=Status.PENDING,
        attempt=0,
        next_trigger=Trigger.TEST,
        created_at=now,
        updated_at=now,
    )
    session.add(delivery)
    session.flush()
    return Job(
        delivery.id,
        club.id,
        endpoint.id,
        "ping",
        endpoint.url,
        endpoint.secret_sealed,
        event.body,
        Status.PENDING,
        0,
        Trigger.TEST,
        now + lease,
        headers_sealed=endpoint.headers_sealed,
        due_at=now,
        trace=trace_context.of(event.traceparent, event.tracestate),
    )
