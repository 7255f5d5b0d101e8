"""A batch of results as the rows the record statements read, one JSON document per batch
(``:results``, row ``m``): a fraction of the work of a row-by-row ``executemany`` for client
and server."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import orjson
from sqlalchemy import Dialect, bindparam

from clubwire.domain.delivering import Result, Trigger
from clubwire.storage.types import UTCDateTime

_Stored = Callable[[datetime | None], object]

# The time of a statement (``:now``), typed as the database stores it.
NOW = bindparam("now", type_=UTCDateTime())

# The columns a recorded attempt sets on its delivery, from the document's row ``m``, with
# the guard that the delivery is still as its job read it.
# A delivery held meanwhile (a Retry or Replay put an earlier one of its key ahead of it)
# stays held.
MOVED = f"""
    status = m.status, attempt = m.number,
    next_attempt_at = CASE WHEN deliveries.next_attempt_at IS NULL THEN NULL
        ELSE m.next_attempt_at END,
    next_attempt_asked = m.asked, next_trigger = '{Trigger.SCHEDULED}',
    response_code = m.response_code, updated_at = :now
"""
# What a recorded attempt keeps of the receiver's answer: all of it, unless its event's
# payload was removed meanwhile (a member erased while the attempt was on its way; the record
# moves the delivery first, so an erasure that holds it is waited for): then nothing a
# receiver wrote, which may quote the payload.
ANSWER_KEPT = """
    CASE WHEN events.payload_removed IS NULL THEN m.error END,
    CASE WHEN events.payload_removed IS NULL THEN m.excerpt ELSE '' END,
    CASE WHEN events.payload_removed IS NULL THEN m.retry_after END"""
# As the job read it: the same attempts and status, and going in order or not as it was (a
# switch to ordered puts a delivery not yet attempted in its line: one claimed before goes
# again, in order).
STILL_AS_READ = (
    "deliveries.id = m.id AND deliveries.attempt = m.number - 1 AND deliveries.status = m.was"
    " AND COALESCE(deliveries.ordering_key, '') = COALESCE(m.ordering_key, '')"
)
# The release of the first of each line named in ``:lines`` (the document's row ``p``: its
# first delivery, and the sequence it missed), when it is held or told a missed sequence.
RELEASED = """
    next_attempt_at = COALESCE(deliveries.next_attempt_at, :now),
    missed_sequence = COALESCE(p.missed, deliveries.missed_sequence),
    updated_at = :now"""
RELEASING = "(deliveries.next_attempt_at IS NULL OR p.missed IS NOT NULL)"


def batch(results: Sequence[Result], dialect: Dialect) -> str:
    """Each result's attempt and its delivery's next state, with the status the delivery must
    still have for the move to apply: the one document both record statements read."""
    stored = _stored_times(dialect)
    return document(
        [
            {
                "id": result.job.delivery_id,
                "number": result.job.attempts_made + 1,
                "trigger": str(result.job.trigger),
                "started_at": stored(result.started_at),
                "duration_ms": result.duration_ms,
                "response_code": result.response_code,
                "error": result.error,
                "excerpt": result.excerpt,
                "retry_after": result.retry_after,
                "was": str(result.job.status),
                "status": str(result.verdict.status),
                "next_attempt_at": stored(result.verdict.next_attempt_at),
                "asked": result.verdict.asked,
                "ordering_key": result.job.ordering_key,
            }
            for result in results
        ]
    )


def ids(results: Sequence[Result]) -> str:
    """The batch's delivery ids, space-separated (ids hold no spaces): one text parameter,
    which PostgreSQL splits (``string_to_array``) for an index scan of the batch's rows. A
    list parameter would cost the driver a quoting check per id."""
    return " ".join(result.job.delivery_id for result in results)


def document(rows: Sequence[object]) -> str:
    return orjson.dumps(rows).decode()


def _stored_times(dialect: Dialect) -> _Stored:
    """Datetimes as the database stores them (text on SQLite), for JSON documents."""
    process = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    return process if process is not None else (lambda value: value)
