"""The worker's first database steps: find the endpoints with due deliveries, claim each
one's oldest as jobs, and give back jobs it will not attempt; and Send test's job.

A claim leases deliveries (``lease_until``) for longer than an attempt may take; a worker
that dies leaves its leases to run out, and the deliveries are claimed again (at least once).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    JSON,
    Column,
    ColumnElement,
    Integer,
    ScalarSelect,
    Select,
    String,
    Update,
    any_,
    bindparam,
    column,
    func,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.orm import Session

from clubwire import errors, ids
from clubwire.domain import event_catalog
from clubwire.domain.delivery_rules import Status, Trigger
from clubwire.services import endpoints as endpoint_service
from clubwire.services import events as event_service
from clubwire.storage import tables
from clubwire.storage.models import Club, Delivery
from clubwire.storage.types import UTCDateTime


@dataclass(frozen=True, slots=True)
class Job:
    """A claimed delivery: everything one attempt needs."""

    delivery_id: str
    club_id: str
    endpoint_id: str
    kind: str
    url: str
    secret_sealed: str
    body: bytes
    status: Status
    attempts_made: int
    trigger: Trigger
    lease_until: datetime


# The hot statements run on the tables (Core), not through the ORM's machinery.
_d = tables.deliveries.c
_NOW = bindparam("now", type_=UTCDateTime())


def due_endpoints(session: Session, now: datetime) -> list[str]:
    """The endpoints with deliveries due and not leased, the longest waiting first.

    It skips through the pending index from endpoint to endpoint (a recursive query: two
    probes per endpoint), so it costs the same however many deliveries are due.
    """
    return list(session.connection().execute(_DUE_ENDPOINTS, {"now": now}).scalars())


def _due() -> Select[Any]:
    """Deliveries due now whose lease (if any) has run out."""
    return select(_d.id).where(
        _d.next_attempt_at <= _NOW, or_(_d.lease_until.is_(None), _d.lease_until < _NOW)
    )


def _first_due(after: ColumnElement[str] | None = None) -> ScalarSelect[str]:
    """The first endpoint (in id order, after ``after``) with a delivery due."""
    first = _due().with_only_columns(_d.endpoint_id)
    if after is not None:
        first = first.where(_d.endpoint_id > after)
    return first.order_by(_d.endpoint_id).limit(1).scalar_subquery()


def _endpoints_due() -> Select[Any]:
    due = select(_first_due().label("endpoint_id")).cte("due", recursive=True)
    due = due.union_all(
        select(_first_due(after=due.c.endpoint_id)).where(due.c.endpoint_id.is_not(None))
    )
    oldest = (
        _due()
        .with_only_columns(_d.next_attempt_at)
        .where(_d.endpoint_id == due.c.endpoint_id)
        .order_by(_d.next_attempt_at)
        .limit(1)
        .scalar_subquery()
    )
    return select(due.c.endpoint_id).where(due.c.endpoint_id.is_not(None)).order_by(oldest)


_DUE_ENDPOINTS = _endpoints_due()


def claim(session: Session, now: datetime, lease: timedelta, wants: Mapping[str, int]) -> list[Job]:
    """Lease up to ``wants[endpoint]`` due deliveries of each endpoint, oldest first (on
    PostgreSQL skipping rows another worker is claiming), in one statement on PostgreSQL
    and one per endpoint on SQLite, in process, which has no ``LATERAL``."""
    lease_until = now + lease
    connection = session.connection()
    times = {"now": now, "lease_until": lease_until}
    if connection.dialect.name == "postgresql":
        wanted = [{"endpoint_id": e, "count": count} for e, count in wants.items()]
        found = connection.execute(_LEASE_ALL, {"wants": wanted, **times}).all()
    else:
        found = []
        for endpoint_id, count in wants.items():
            values = {"endpoint": endpoint_id, "count": count, **times}
            found += connection.execute(_LEASE_ONE, values).all()
    return _jobs(session, found, lease_until, now) if found else []


def _through(key: Column[str], column: Column[Any]) -> ScalarSelect[Any]:
    """``column`` of the row that the delivery's ``key`` points at."""
    return select(column).where(column.table.c.id == key).scalar_subquery()


# What an attempt needs, returned by the claim itself: one statement, one round trip.
_JOB_COLUMNS = (
    _d.id,
    _d.club_id,
    _d.endpoint_id,
    _through(_d.event_id, tables.events.c.kind),
    _through(_d.endpoint_id, tables.endpoints.c.url),
    _through(_d.endpoint_id, tables.endpoints.c.secret_sealed),
    _through(_d.event_id, tables.events.c.body),
    _d.status,
    _d.attempt,
    _d.next_trigger,
    _through(_d.endpoint_id, tables.endpoints.c.enabled),
    _through(_d.club_id, tables.clubs.c.webhooks_enabled),
)


def _oldest_due(endpoint_id: ColumnElement[str], count: ColumnElement[int]) -> Select[Any]:
    """One endpoint's ``count`` oldest due deliveries, locked (PostgreSQL skips locked rows)."""
    return (
        _due()
        .where(_d.endpoint_id == endpoint_id)
        .order_by(_d.next_attempt_at)
        .limit(count)
        .with_for_update(skip_locked=True)
    )


def _leasing(picked: ColumnElement[bool]) -> Update:
    """Lease the picked deliveries; what their attempts need comes back with them."""
    lease_until = bindparam("lease_until", type_=UTCDateTime())
    return (
        update(tables.deliveries)
        .where(picked)
        .values(lease_until=lease_until)
        .returning(*_JOB_COLUMNS)
    )


_LEASE_ONE = _leasing(
    _d.id.in_(_oldest_due(bindparam("endpoint"), bindparam("count")).scalar_subquery())
)

# PostgreSQL: every endpoint's share at once, the wants sent as one JSON document; the
# picked ids become an array, so the plan reads deliveries through their key.
_WANTS = (
    func.json_to_recordset(bindparam("wants", type_=JSON))
    .table_valued(column("endpoint_id", String), column("count", Integer))
    .render_derived(name="w", with_types=True)
)
_PICKED = _oldest_due(_WANTS.c.endpoint_id, _WANTS.c.count).lateral("picked")
_LEASE_ALL = _leasing(
    _d.id
    == any_(
        func.array(select(_PICKED.c.id).select_from(_WANTS).join(_PICKED, true()).scalar_subquery())
    )
)


# A job's first fields: delivery, club and endpoint ids, kind, URL, sealed secret, body.
_JobHead = tuple[str, str, str, str, str, str, bytes]


def _jobs(session: Session, rows: Sequence[Any], lease_until: datetime, now: datetime) -> list[Job]:
    """The claimed rows as jobs, in ``_JOB_COLUMNS`` order (the Job's own, then whether the
    endpoint and the club's module are on); deliveries with either off are stopped instead."""
    jobs, stopped = [], []
    for *fields, status, attempts, trigger, enabled, on in rows:
        if not (enabled and on):
            stopped.append(fields[0])
            continue
        head = cast(_JobHead, tuple(fields))
        jobs.append(Job(*head, Status(status), attempts, Trigger(trigger), lease_until))
    if stopped:
        _stop(session, stopped, now)
    return jobs


def _stop(session: Session, ids: Sequence[str], now: datetime) -> None:
    """Deliveries whose endpoint or module went off: waiting ones become skipped."""
    endpoint_service.skip_waiting(session, Delivery.id.in_(ids), now)
    session.execute(
        update(Delivery).where(Delivery.id.in_(ids)).values(next_attempt_at=None, lease_until=None),
        execution_options={"synchronize_session": False},
    )


def release(session: Session, jobs: Iterable[Job]) -> None:
    """Give claimed jobs back unattempted (a worker over its per-endpoint limit)."""
    ids = [job.delivery_id for job in jobs]
    if ids:
        session.execute(
            update(Delivery).where(Delivery.id.in_(ids)).values(lease_until=None),
            execution_options={"synchronize_session": False},
        )


def create_test_job(
    session: Session, club: Club, endpoint_id: str, now: datetime, lease: timedelta
) -> Job:
    """A ``ping`` to one endpoint, leased to the caller, who sends it at once (Send test).

    Its data is the catalog's ``ping`` sample, the very one the receivers' guide shows."""
    if not club.webhooks_enabled:
        raise errors.InvalidInput("Webhooks & API are not enabled for this club.")
    endpoint = endpoint_service.get_endpoint(session, club.id, endpoint_id)
    payload = event_catalog.validate(
        event_catalog.PING, event_catalog.sample(event_catalog.PING, now)
    )
    event = event_service.record_event(session, club, event_catalog.PING, payload, now)
    delivery = Delivery(
        id=ids.new_id("dlv"),
        club_id=club.id,
        event_id=event.id,
        endpoint_id=endpoint.id,
        status=Status.PENDING,
        attempt=0,
        next_trigger=Trigger.TEST,
        lease_until=now + lease,
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
    )
