"""The worker's database steps: claim due deliveries, and record attempts, in batches.

A claim leases deliveries (``lease_until``) for longer than an attempt may take; a worker
that dies leaves its leases to run out, and the deliveries are claimed again (at least once).
Recording is guarded by the lease, so a worker that lost its lease cannot overwrite a newer
state.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    Column,
    Integer,
    ScalarSelect,
    Table,
    bindparam,
    case,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from clubwire import errors, ids
from clubwire.domain import deliveries as rules
from clubwire.domain import events
from clubwire.domain.deliveries import Status, Trigger
from clubwire.domain.retry import RetrySchedule
from clubwire.services import endpoints as endpoint_service
from clubwire.services import events as event_service
from clubwire.storage.models import Attempt, Club, Delivery, Endpoint, Event

EXCERPT_LIMIT = 1000


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


@dataclass(frozen=True, slots=True)
class Result:
    """What one attempt of a job gave."""

    job: Job
    started_at: datetime
    ok: bool
    response_code: int | None
    error: str | None
    duration_ms: int
    excerpt: str


def plain(result: Result) -> str:
    """The outcome in plain words, for the CLI and the settings UI: ``200 in 43 ms``, or
    what went wrong."""
    if result.ok:
        return f"{result.response_code} in {result.duration_ms} ms"
    reason = result.error or f"the receiver answered {result.response_code}"
    return f"failed: {reason} (after {result.duration_ms} ms)"


# The hot statements run on the tables (Core), not through the ORM's machinery.
_deliveries = cast(Table, Delivery.__table__)
_events = cast(Table, Event.__table__)
_endpoints = cast(Table, Endpoint.__table__)
_clubs = cast(Table, Club.__table__)
_attempts = cast(Table, Attempt.__table__)
_d = _deliveries.c


def claim(
    session: Session,
    now: datetime,
    limit: int,
    lease: timedelta,
    busy_endpoints: Collection[str] = (),
) -> list[Job]:
    """Lease up to ``limit`` due deliveries (skipping locked ones on PostgreSQL)."""
    d = _deliveries.c
    due = (
        select(d.id)
        .where(d.next_attempt_at <= now, or_(d.lease_until.is_(None), d.lease_until < now))
        .order_by(d.next_attempt_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if busy_endpoints:
        due = due.where(d.endpoint_id.not_in(busy_endpoints))
    lease_until = now + lease
    leased = (
        update(_deliveries)
        .where(d.id.in_(due.scalar_subquery()))
        .values(lease_until=lease_until)
        .returning(*_JOB_COLUMNS)
    )
    rows = session.connection().execute(leased).all()
    return _jobs(session, rows, lease_until, now) if rows else []


def _through(key: Column[str], column: Column[Any]) -> ScalarSelect[Any]:
    """``column`` of the row that the delivery's ``key`` points at."""
    return select(column).where(column.table.c.id == key).scalar_subquery()


# What an attempt needs, returned by the claim itself: one statement, one round trip.
_JOB_COLUMNS = (
    _d.id,
    _d.club_id,
    _d.endpoint_id,
    _through(_d.event_id, _events.c.kind),
    _through(_d.endpoint_id, _endpoints.c.url),
    _through(_d.endpoint_id, _endpoints.c.secret_sealed),
    _through(_d.event_id, _events.c.body),
    _d.status,
    _d.attempt,
    _d.next_trigger,
    _through(_d.endpoint_id, _endpoints.c.enabled),
    _through(_d.club_id, _clubs.c.webhooks_enabled),
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


def record(
    session: Session, results: Sequence[Result], schedule: RetrySchedule, now: datetime
) -> None:
    """Store a batch of attempts and move each delivery and endpoint on (DESIGN §6).

    Attempts of deliveries deleted meanwhile (with their endpoint) are dropped.
    """
    results = _still_there(session, results)
    if not results:
        return
    verdicts = [
        rules.judge(r.job.status, r.job.trigger, r.job.attempts_made + 1, r.ok, now, schedule)
        for r in results
    ]
    session.connection().execute(insert(_attempts), [_attempt_row(r) for r in results])
    _move_deliveries(session, results, verdicts, now)
    _update_endpoints(session, results, verdicts, now)


def _still_there(session: Session, results: Sequence[Result]) -> Sequence[Result]:
    ids = [result.job.delivery_id for result in results]
    query = select(_deliveries.c.id).where(_deliveries.c.id.in_(ids))
    present = set(session.connection().execute(query).scalars())
    return [result for result in results if result.job.delivery_id in present]


def _attempt_row(result: Result) -> dict[str, object]:
    return {
        "delivery_id": result.job.delivery_id,
        "number": result.job.attempts_made + 1,
        "trigger": result.job.trigger,
        "started_at": result.started_at,
        "duration_ms": result.duration_ms,
        "response_code": result.response_code,
        "error": result.error,
        "excerpt": result.excerpt[:EXCERPT_LIMIT],
    }


_MOVE = (
    update(_deliveries)
    .where(
        _deliveries.c.id == bindparam("d_id"),
        _deliveries.c.lease_until == bindparam("d_lease"),
    )
    .values(
        status=bindparam("d_status"),
        attempt=bindparam("d_attempt"),
        next_attempt_at=bindparam("d_next"),
        next_trigger=Trigger.SCHEDULED,
        lease_until=None,
        response_code=bindparam("d_code"),
        updated_at=bindparam("d_now"),
    )
)


def _move_deliveries(
    session: Session, results: Sequence[Result], verdicts: Sequence[rules.Verdict], now: datetime
) -> None:
    params = [
        {
            "d_id": r.job.delivery_id,
            "d_lease": r.job.lease_until,
            "d_status": v.status,
            "d_attempt": r.job.attempts_made + 1,
            "d_next": v.next_attempt_at,
            "d_code": r.response_code,
            "d_now": now,
        }
        for r, v in zip(results, verdicts, strict=True)
    ]
    session.connection().execute(_MOVE, params)


_TOUCH = (
    update(_endpoints)
    .where(_endpoints.c.id == bindparam("e_id"))
    .values(
        last_delivery_at=bindparam("e_at"),
        last_response_code=bindparam("e_code"),
        dead_in_a_row=case(
            (bindparam("e_reset", type_=Boolean), bindparam("e_died", type_=Integer)),
            else_=_endpoints.c.dead_in_a_row + bindparam("e_died", type_=Integer),
        ),
    )
)


def _update_endpoints(
    session: Session, results: Sequence[Result], verdicts: Sequence[rules.Verdict], now: datetime
) -> None:
    """Last delivery and dead in a row (+1 per delivery that died, back to 0 on a success),
    one statement for the batch; endpoints in id order, so workers never deadlock."""
    latest: dict[str, tuple[Result, bool, int]] = {}
    for result, verdict in zip(results, verdicts, strict=True):
        _, reset, died = latest.get(result.job.endpoint_id, (result, False, 0))
        if verdict.counts_as_success:
            reset, died = True, 0
        elif verdict.became_dead:
            died += 1
        latest[result.job.endpoint_id] = (result, reset, died)
    params = [
        {
            "e_id": endpoint_id,
            "e_at": r.started_at,
            "e_code": r.response_code,
            "e_reset": reset,
            "e_died": died,
        }
        for endpoint_id, (r, reset, died) in sorted(latest.items())
    ]
    session.connection().execute(_TOUCH, params)
    _switch_off(session, [e for e, (_, _, died) in sorted(latest.items()) if died], now)


def _switch_off(session: Session, endpoint_ids: Sequence[str], now: datetime) -> None:
    if not endpoint_ids:
        return
    switched = session.scalars(
        update(Endpoint)
        .where(
            Endpoint.id.in_(endpoint_ids),
            Endpoint.enabled.is_(True),
            Endpoint.dead_in_a_row >= rules.DEAD_IN_A_ROW_LIMIT,
        )
        .values(
            enabled=False,
            disabled_reason=rules.SWITCHED_OFF_REASON,
            disabled_at=now,
            updated_at=now,
        )
        .returning(Endpoint.id),
        execution_options={"synchronize_session": False},
    ).all()
    if switched:
        endpoint_service.skip_waiting(session, Delivery.endpoint_id.in_(switched), now)


TEST_MESSAGE = "This is a test from clubwire: your endpoint is reachable."


def create_test_job(
    session: Session, club: Club, endpoint_id: str, now: datetime, lease: timedelta
) -> Job:
    """A ``ping`` to one endpoint, leased to the caller, who sends it at once (Send test)."""
    if not club.webhooks_enabled:
        raise errors.InvalidInput("Webhooks & API are not enabled for this club.")
    endpoint = endpoint_service.get_endpoint(session, club.id, endpoint_id)
    payload = events.validate("ping", {"message": TEST_MESSAGE})
    event = event_service.record_event(session, club, "ping", payload, now)
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
