"""The worker's last database step: record a batch of attempts and move each delivery and
endpoint on (DESIGN §6), switching an endpoint off after too many dead deliveries in a row.

Recording is guarded by the lease each attempt was made under, so a worker that lost its
lease cannot overwrite a newer state. A batch is one transaction (``record_batch``); when
one of its rows spoils it, each row is recorded alone, and a row the database still refuses
as its stand-in: a failed attempt with a generic error.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from datetime import datetime

import orjson
from sqlalchemy import Boolean, Dialect, Integer, bindparam, case, exc, text, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import delivery_rules
from clubwire.domain.delivery_rules import Trigger
from clubwire.domain.retry import RetrySchedule
from clubwire.services import claims
from clubwire.services import endpoints as endpoint_service
from clubwire.storage import tables
from clubwire.storage.models import Delivery, Endpoint
from clubwire.storage.types import UTCDateTime

# The most of each text an attempt keeps. ``worker.client`` cuts what receivers answer to
# these where it enters, so no answer is too long for its column.
ERROR_LIMIT = 200  # the size of attempts.error (String(200) in storage.models)
EXCERPT_LIMIT = 1000  # characters of the answer's body (attempts.excerpt is Text)
UNRECORDABLE = "could not record the receiver's answer"


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    """What one attempt of a job gave; ``error`` and ``excerpt`` already safe to store and
    show, within ``ERROR_LIMIT`` and ``EXCERPT_LIMIT`` (``worker.client`` sees to it)."""

    job: claims.Job
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
    verdicts = [_judged(result, schedule, now) for result in results]
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


@dataclasses.dataclass(frozen=True, slots=True)
class Refused:
    """A result the database would not take, told by the kinds of error only (their text
    may quote the receiver): its stand-in was recorded instead, unless that failed too
    (``stand_in_error``), and then the delivery is sent again when its lease runs out."""

    delivery_id: str
    error: str
    stand_in_error: str | None


def record_batch(
    sessions: sessionmaker[Session],
    results: Sequence[Result],
    schedule: RetrySchedule,
    now: datetime,
) -> list[Refused]:
    """``record`` the batch in one transaction; if one of its rows spoils it, each result in
    a transaction of its own, so no answer holds up the rest. The results the database
    refused come back. Raises when the database itself fails: try the batch again later."""
    try:
        _record_in(sessions, results, schedule, now)
    except Exception as error:
        if not _spoiled_by_a_row(error):
            raise
    else:
        return []
    alone = (_record_alone(sessions, result, schedule, now) for result in results)
    return [refused for refused in alone if refused is not None]


def _stand_in(result: Result) -> Result:
    """What is recorded for a result the database refused: a failed attempt with a generic
    error and nothing of what the receiver said, moved on by the schedule as failures are."""
    return dataclasses.replace(result, ok=False, response_code=None, error=UNRECORDABLE, excerpt="")


def _record_alone(
    sessions: sessionmaker[Session], result: Result, schedule: RetrySchedule, now: datetime
) -> Refused | None:
    error = _failure(sessions, result, schedule, now)
    if error is None:
        return None
    again = _failure(sessions, _stand_in(result), schedule, now)
    return Refused(result.job.delivery_id, error, again)


def _failure(
    sessions: sessionmaker[Session], result: Result, schedule: RetrySchedule, now: datetime
) -> str | None:
    """Record one result in its own transaction; the kind of error if that failed."""
    try:
        _record_in(sessions, [result], schedule, now)
    except Exception as error:
        return type(error).__name__
    return None


def _record_in(
    sessions: sessionmaker[Session],
    results: Sequence[Result],
    schedule: RetrySchedule,
    now: datetime,
) -> None:
    with sessions.begin() as session:
        record(session, results, schedule, now)


def _spoiled_by_a_row(error: Exception) -> bool:
    """Whether a batch failed because of what a row held (a value the database or the JSON
    encoder refused), so recording its rows one by one helps. An unreachable, restarting or
    busy database is not: the batch is tried again whole a moment later."""
    if isinstance(error, exc.OperationalError | exc.InterfaceError | exc.TimeoutError):
        return False
    return not (isinstance(error, exc.DBAPIError) and error.connection_invalidated)


def _judged(result: Result, schedule: RetrySchedule, now: datetime) -> delivery_rules.Verdict:
    """Where the attempt moves its delivery; a retry due at a random point of its step's
    spread, so that one endpoint's retries do not come due together."""
    job = result.job
    attempt = job.attempts_made + 1
    return delivery_rules.judge(
        job.status, job.trigger, attempt, result.ok, now, schedule, random.random()
    )


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
        "excerpt": result.excerpt,
    }


def _move_row(
    result: Result, verdict: delivery_rules.Verdict, stored: _Stored
) -> dict[str, object]:
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
    update(tables.endpoints)
    .where(tables.endpoints.c.id == bindparam("e_id"))
    .values(
        last_delivery_at=bindparam("e_at"),
        last_response_code=bindparam("e_code"),
        dead_in_a_row=case(
            (bindparam("e_reset", type_=Boolean), bindparam("e_died", type_=Integer)),
            else_=tables.endpoints.c.dead_in_a_row + bindparam("e_died", type_=Integer),
        ),
    )
)


def _update_endpoints(
    session: Session,
    results: Sequence[Result],
    verdicts: Sequence[delivery_rules.Verdict],
    now: datetime,
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
            Endpoint.dead_in_a_row >= delivery_rules.DEAD_IN_A_ROW_LIMIT,
        )
        .values(
            enabled=False,
            disabled_reason=delivery_rules.SWITCHED_OFF_REASON,
            disabled_at=now,
            updated_at=now,
        )
        .returning(Endpoint.id),
        execution_options={"synchronize_session": False},
    ).all()
    if switched:
        endpoint_service.skip_waiting(session, Delivery.endpoint_id.in_(switched), now)
