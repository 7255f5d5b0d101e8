"""The worker's database steps: find the endpoints with due deliveries, claim each one's
oldest, and record attempts, in batches.

A claim leases deliveries (``lease_until``) for longer than an attempt may take; a worker
that dies leaves its leases to run out, and the deliveries are claimed again (at least once).
Recording is guarded by the lease, so a worker that lost its lease cannot overwrite a newer
state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import orjson
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    ColumnElement,
    Dialect,
    Integer,
    ScalarSelect,
    Select,
    String,
    Table,
    Update,
    any_,
    bindparam,
    case,
    column,
    func,
    or_,
    select,
    text,
    true,
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
from clubwire.storage.types import UTCDateTime

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
        update(_deliveries).where(picked).values(lease_until=lease_until).returning(*_JOB_COLUMNS)
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


def record(
    session: Session, results: Sequence[Result], schedule: RetrySchedule, now: datetime
) -> None:
    """Store a batch of attempts and move each delivery and endpoint on (DESIGN §6).

    Attempts of deliveries deleted meanwhile (with their endpoint) are dropped. Attempts and
    moves are one statement each, whatever the batch's size: its rows go as one JSON
    document, a fraction of the work of a row-by-row ``executemany`` for client and server.
    """
    if not results:
        return
    verdicts = [
        rules.judge(r.job.status, r.job.trigger, r.job.attempts_made + 1, r.ok, now, schedule)
        for r in results
    ]
    connection = session.connection()
    stored = _stored_times(connection.dialect)
    insert_attempts, move = _BULK[connection.dialect.name]
    # PostgreSQL also takes the ids as an array: its plans then read deliveries by their key.
    common = {"ids": [result.job.delivery_id for result in results], "now": now}
    attempts = [_attempt_row(result, stored) for result in results]
    connection.execute(insert_attempts, {"rows": _document(attempts), **common})
    moves = [_move_row(r, v, stored) for r, v in zip(results, verdicts, strict=True)]
    connection.execute(move, {"rows": _document(moves), **common})
    _update_endpoints(session, results, verdicts, now)


def _document(rows: list[dict[str, object]]) -> str:
    return orjson.dumps(rows).decode()


_Stored = Callable[[datetime | None], object]


def _stored_times(dialect: Dialect) -> _Stored:
    """Datetimes as the database stores them (text on SQLite), for JSON documents."""
    process = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    return process if process is not None else (lambda value: value)


def _attempt_row(result: Result, stored: _Stored) -> dict[str, object]:
    return {
        "delivery_id": result.job.delivery_id,
        "number": result.job.attempts_made + 1,
        "trigger": str(result.job.trigger),
        "started_at": stored(result.started_at),
        "duration_ms": result.duration_ms,
        "response_code": result.response_code,
        "error": result.error,
        "excerpt": result.excerpt[:EXCERPT_LIMIT],
    }


def _move_row(result: Result, verdict: rules.Verdict, stored: _Stored) -> dict[str, object]:
    """A delivery's next state, guarded by the lease its attempt was made under."""
    return {
        "id": result.job.delivery_id,
        "lease_until": stored(result.job.lease_until),
        "status": str(verdict.status),
        "attempt": result.job.attempts_made + 1,
        "next_attempt_at": stored(verdict.next_attempt_at),
        "response_code": result.response_code,
    }


_NOW_STORED = bindparam("now", type_=UTCDateTime())
_SCHEDULED = str(Trigger.SCHEDULED)

# By dialect: attempts inserted, and deliveries moved, from a JSON document of rows.
_BULK = {
    "postgresql": (
        text(
            """
            INSERT INTO attempts (delivery_id, number, trigger, started_at, duration_ms,
                response_code, error, excerpt)
            SELECT a.* FROM json_to_recordset(CAST(:rows AS JSON)) AS a (
                delivery_id VARCHAR, number INTEGER, trigger VARCHAR, started_at TIMESTAMPTZ,
                duration_ms INTEGER, response_code INTEGER, error VARCHAR, excerpt TEXT)
            WHERE a.delivery_id IN (
                SELECT id FROM deliveries WHERE id = ANY(CAST(:ids AS VARCHAR[])))
            """
        ),
        text(
            f"""
            UPDATE deliveries SET
                status = m.status, attempt = m.attempt, next_attempt_at = m.next_attempt_at,
                next_trigger = '{_SCHEDULED}', lease_until = NULL,
                response_code = m.response_code, updated_at = :now
            FROM json_to_recordset(CAST(:rows AS JSON)) AS m (
                id VARCHAR, lease_until TIMESTAMPTZ, status VARCHAR, attempt INTEGER,
                next_attempt_at TIMESTAMPTZ, response_code INTEGER)
            WHERE deliveries.id = ANY(CAST(:ids AS VARCHAR[]))
                AND deliveries.id = m.id AND deliveries.lease_until = m.lease_until
            """  # noqa: S608 (a constant of ours, not input)
        ).bindparams(_NOW_STORED),
    ),
    "sqlite": (
        text(
            """
            INSERT INTO attempts (delivery_id, number, trigger, started_at, duration_ms,
                response_code, error, excerpt)
            SELECT
                json_extract(value, '$.delivery_id'), json_extract(value, '$.number'),
                json_extract(value, '$.trigger'), json_extract(value, '$.started_at'),
                json_extract(value, '$.duration_ms'), json_extract(value, '$.response_code'),
                json_extract(value, '$.error'), json_extract(value, '$.excerpt')
            FROM json_each(:rows)
            WHERE EXISTS (
                SELECT 1 FROM deliveries WHERE id = json_extract(value, '$.delivery_id'))
            """
        ),
        text(
            f"""
            WITH m AS (
                SELECT
                    json_extract(value, '$.id') AS id,
                    json_extract(value, '$.lease_until') AS lease_until,
                    json_extract(value, '$.status') AS status,
                    json_extract(value, '$.attempt') AS attempt,
                    json_extract(value, '$.next_attempt_at') AS next_attempt_at,
                    json_extract(value, '$.response_code') AS response_code
                FROM json_each(:rows))
            UPDATE deliveries SET
                status = m.status, attempt = m.attempt, next_attempt_at = m.next_attempt_at,
                next_trigger = '{_SCHEDULED}', lease_until = NULL,
                response_code = m.response_code, updated_at = :now
            FROM m
            WHERE deliveries.id = m.id AND deliveries.lease_until = m.lease_until
            """  # noqa: S608 (a constant of ours, not input)
        ).bindparams(_NOW_STORED),
    ),
}


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
