"""The worker's last database step: record a batch of attempts and move each delivery and
endpoint on (DESIGN §6), switching an endpoint off after too many dead deliveries in a row,
or at once when its receiver answered 410 Gone.

A delivery moves only if it is still as its job read it (the same status and number of
attempts), so a worker that lost its lease cannot overwrite a newer state. A batch is one
transaction (``record_batch``); when one of its rows spoils it, each row is recorded alone,
and a row the database still refuses as its stand-in: a failed attempt with a generic error.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import Boolean, Integer, bindparam, case, exc, or_, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire import tracing
from clubwire.domain import delivering, off_reasons
from clubwire.domain.delivering import Result, RetrySchedule, Trigger
from clubwire.services import endpoints, ordered_lines
from clubwire.services.mail import notifications
from clubwire.storage import queue, tables
from clubwire.storage.models import Delivery, Endpoint

# Named as before the move into a sub-package: log lines carry the name ("logger").
log = logging.getLogger("clubwire.services.records")

# The most of each text an attempt keeps. ``services.delivery.outbound`` cuts what receivers
# answer to these where it enters, so no answer is too long for its column.
ERROR_LIMIT = 200  # the size of attempts.error (String(200) in storage.models)
EXCERPT_LIMIT = 1000  # characters of the answer's body (attempts.excerpt is Text)
RETRY_AFTER_LIMIT = 100  # the size of attempts.retry_after (String(100))
UNRECORDABLE = "could not record the receiver's answer"


def record(
    session: Session,
    results: Sequence[Result],
    now: datetime,
    mail: notifications.FailureMail | None = None,
) -> list[str]:
    """Store a batch of attempts and move each delivery and endpoint on as the attempts'
    verdicts say (DESIGN §6), a few statements whatever the batch's size; with ``mail``,
    queue the emails an endpoint's dead deliveries call for. A delivery that goes in order
    and is over (succeeded or died) leaves its line, and the next of its key is released:
    the endpoints of those released."""
    if not results:
        return []
    in_order = [result for result in results if result.job.ordering_key is not None]
    ordered_lines.lock_endpoints(session, {result.job.endpoint_id for result in in_order})
    connection = session.connection()
    moved = queue.on(connection).record(connection, results, now)
    over = {
        result.job.delivery_id: result.verdict.became_dead
        for result in in_order
        if result.job.delivery_id in moved and result.verdict.next_attempt_at is None
    }
    died = {delivery_id for delivery_id, dead in over.items() if dead}
    released = ordered_lines.finished(session, over.keys(), died, now)
    _update_endpoints(session, results, now, mail)
    return released


@dataclasses.dataclass(frozen=True, slots=True)
class Recorded:
    """What recording a batch came to: the results the database refused, and the endpoints
    whose next delivery in order was released (for the worker to claim at once)."""

    refused: list[Refused]
    released: list[str]


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
    mail: notifications.FailureMail | None = None,
) -> Recorded:
    """``record`` the batch in one transaction; if one of its rows spoils it, each result in
    a transaction of its own, so no answer holds up the rest. Raises when the database
    itself fails: try the batch again later. With tracing on, each result's record is a
    span beneath its attempt's."""
    with tracing.recording(results):
        return _record_batch(sessions, results, schedule, now, mail)


def _record_batch(
    sessions: sessionmaker[Session],
    results: Sequence[Result],
    schedule: RetrySchedule,
    now: datetime,
    mail: notifications.FailureMail | None,
) -> Recorded:
    try:
        return Recorded([], _record_in(sessions, results, now, mail))
    except Exception as error:
        if not _spoiled_by_a_row(error):
            raise
    released: set[str] = set()
    refused = []
    for result in results:
        alone = _record_alone(sessions, result, schedule, now, mail)
        released.update(alone.released)
        refused += alone.refused
    return Recorded(refused, sorted(released))


def tell_refused(refused: Refused) -> None:
    """One line for a result the database refused, by ids and kinds of error only."""
    if refused.stand_in_error is None:
        log.warning(
            "the attempt of %s could not be recorded as it was (%s); recorded as failed",
            refused.delivery_id,
            refused.error,
        )
    else:
        log.error(
            "the attempt of %s could not be recorded (%s, then %s); it is sent again when "
            "its lane is given back",
            refused.delivery_id,
            refused.error,
            refused.stand_in_error,
        )


def _stand_in(result: Result, schedule: RetrySchedule, now: datetime) -> Result:
    """What is recorded for a result the database refused: a failed attempt with a generic
    error and nothing of what the receiver said, moved on by the schedule as failures are."""
    verdict = delivering.judge(result.job, False, now, schedule, random.random())
    return result._replace(
        ok=False,
        response_code=None,
        error=UNRECORDABLE,
        excerpt="",
        retry_after=None,
        verdict=verdict,
    )


def _record_alone(
    sessions: sessionmaker[Session],
    result: Result,
    schedule: RetrySchedule,
    now: datetime,
    mail: notifications.FailureMail | None,
) -> Recorded:
    released, error = _failure(sessions, result, now, mail)
    if error is None:
        return Recorded([], released)
    released, again = _failure(sessions, _stand_in(result, schedule, now), now, mail)
    return Recorded([Refused(result.job.delivery_id, error, again)], released)


def _failure(
    sessions: sessionmaker[Session],
    result: Result,
    now: datetime,
    mail: notifications.FailureMail | None,
) -> tuple[list[str], str | None]:
    """Record one result in its own transaction: the endpoints released, or the kind of
    error if that failed."""
    try:
        return _record_in(sessions, [result], now, mail), None
    except Exception as error:
        return [], type(error).__name__


def _record_in(
    sessions: sessionmaker[Session],
    results: Sequence[Result],
    now: datetime,
    mail: notifications.FailureMail | None,
) -> list[str]:
    with sessions.begin() as session:
        return record(session, results, now, mail)


def _spoiled_by_a_row(error: Exception) -> bool:
    """Whether a batch failed because of what a row held (a value the database or the JSON
    encoder refused), so recording its rows one by one helps. An unreachable, restarting or
    busy database is not: the batch is tried again whole a moment later."""
    if isinstance(error, exc.OperationalError | exc.InterfaceError | exc.TimeoutError):
        return False
    return not (isinstance(error, exc.DBAPIError) and error.connection_invalidated)


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


@dataclasses.dataclass(slots=True)
class _Tally:
    """What a batch did to one endpoint: its last attempt there, whether a delivery
    succeeded (dead in a row starts again from ``died``), how many died (after the last
    success), and the attempt answered 410 Gone, if one was."""

    last: Result
    reset: bool = False
    died: int = 0
    gone: Result | None = None

    def add(self, result: Result) -> None:
        self.last = result
        if result.verdict.counts_as_success:
            self.reset, self.died = True, 0
        elif result.verdict.became_dead:
            self.died += 1
        if result.verdict.gone:
            self.gone = result


def _tally(results: Sequence[Result]) -> dict[str, _Tally]:
    """Each endpoint's tally, in id order. A Send test is no delivery: it counts for none."""
    tallies: dict[str, _Tally] = {}
    for result in results:
        if result.job.trigger is not Trigger.TEST:
            tallies.setdefault(result.job.endpoint_id, _Tally(result)).add(result)
    return dict(sorted(tallies.items()))


def _update_endpoints(
    session: Session,
    results: Sequence[Result],
    now: datetime,
    mail: notifications.FailureMail | None,
) -> None:
    """Last delivery and dead in a row (+1 per delivery that died, back to 0 on a success),
    one statement for the batch; endpoints in id order, so workers never deadlock. Then
    switch off those at the limit or answered 410 Gone, and queue the emails."""
    tallies = _tally(results)
    if not tallies:
        return
    params = [
        {
            "e_id": endpoint_id,
            "e_at": tally.last.started_at,
            "e_code": tally.last.response_code,
            "e_reset": tally.reset,
            "e_died": tally.died,
        }
        for endpoint_id, tally in tallies.items()
    ]
    session.connection().execute(_TOUCH, params)
    switched = _switch_off(session, tallies, now)
    if mail is not None:
        told = {
            endpoint_id: notifications.Died(tally.died, tally.gone or tally.last)
            for endpoint_id, tally in tallies.items()
            if tally.died or endpoint_id in switched
        }
        mail.notify(session, told, switched, now)


def _switch_off(
    session: Session, tallies: Mapping[str, _Tally], now: datetime
) -> Mapping[str, off_reasons.OffReason]:
    """Switch off, in one statement, the endpoints still on that an attempt of the batch
    found gone (410) or whose dead deliveries reached the limit, and skip their waiting
    deliveries; returns each one switched and why. One already off is left as it is, so it
    is switched (and its admins told) once."""
    gone = [endpoint_id for endpoint_id, tally in tallies.items() if tally.gone]
    dying = [endpoint_id for endpoint_id, tally in tallies.items() if tally.died or tally.gone]
    if not dying:
        return {}
    is_gone = Endpoint.id.in_(gone)
    reason = case(  # plain str values: a case's values have no column type to bind them by
        (is_gone, off_reasons.OffReason.GONE.value),
        else_=off_reasons.OffReason.DEAD_IN_A_ROW.value,
    )
    switched = session.execute(
        update(Endpoint)
        .where(
            Endpoint.id.in_(dying),
            Endpoint.enabled.is_(True),
            or_(is_gone, Endpoint.dead_in_a_row >= delivering.DEAD_IN_A_ROW_LIMIT),
        )
        .values(enabled=False, disabled_reason=reason, disabled_at=now, updated_at=now)
        .returning(Endpoint.id, Endpoint.disabled_reason),
        execution_options={"synchronize_session": False},
    ).all()
    reasons = {row.id: off_reasons.OffReason(row.disabled_reason) for row in switched}
    if reasons:
        endpoints.skip_waiting(session, Delivery.endpoint_id.in_(reasons), now)
    return dict(sorted(reasons.items()))
