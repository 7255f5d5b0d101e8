"""The delivery queue on PostgreSQL: its order in ``queue_entries`` (so that a recorded
attempt updates its delivery in place), every lane's jobs in one statement, results recorded
from JSON documents, and workers woken by ``NOTIFY`` naming the endpoints that changed, sent
after the commit (``storage.notices``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from datetime import datetime

import psycopg
from sqlalchemy import Connection, String, bindparam, func, select, text
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.util import greenlet_spawn

from clubwire.storage import database, notices, tables
from clubwire.storage.queue import rows
from clubwire.storage.queue.heads import Pending, Queue, Row, Want, upsert_heads
from clubwire.storage.queue.link import Link, Step, T, Wake

log = logging.getLogger(__name__)

CHANNEL = "clubwire_deliveries"  # endpoints with deliveries due
CHANGED_CHANNEL = "clubwire_endpoints"  # endpoints that changed
RECONNECT_AFTER = 1.0


# The queue's order: a table the deliveries' triggers keep (``models.QueueEntry``).
_PENDING = Pending(tables.queue_entries.c.endpoint_id, tables.queue_entries.c.due_at)

# Each lane reads its entries through their index from where its claims have reached, past
# the ones it holds beyond that, and each entry its delivery and event by key: a LATERAL
# with a LIMIT is never flattened into a join the planner might hash, reading both tables
# whole (it guesses 100 lanes of unknown counts).
_JOBS = text(
    """
    SELECT j.id, j.endpoint_id, j.kind, j.body, j.status, j.attempt, j.next_trigger, q.due_at,
        j.ordering_key, j.missed_sequence, j.traceparent, j.tracestate
    FROM json_to_recordset(CAST(:wants AS JSON)) AS w (
        endpoint_id VARCHAR, count INTEGER, after_due TIMESTAMPTZ, after_id VARCHAR,
        held VARCHAR[])
    CROSS JOIN LATERAL (
        SELECT delivery_id, due_at
        FROM queue_entries
        WHERE endpoint_id = w.endpoint_id AND due_at <= :now
            AND (due_at, delivery_id) > (w.after_due, w.after_id)
            AND delivery_id <> ALL(w.held)
        ORDER BY due_at, delivery_id
        LIMIT w.count) AS q
    CROSS JOIN LATERAL (
        SELECT d.id, d.endpoint_id, e.kind, e.body, d.status, d.attempt, d.next_trigger,
            d.ordering_key, d.missed_sequence, e.traceparent, e.tracestate
        FROM deliveries AS d JOIN events AS e ON e.id = d.event_id
        WHERE d.id = q.delivery_id
        LIMIT 1) AS j
    ORDER BY j.endpoint_id, q.due_at, q.delivery_id
    """
).bindparams(rows.NOW)

# The batch's rows, found through the primary key (never a scan of the table, whatever the
# statistics say): attempts of deliveries deleted meanwhile are dropped.
_BATCH = "deliveries.id = ANY(string_to_array(:ids, ' '))"
_RESULTS = """json_to_recordset(CAST(:results AS JSON)) AS m (
        id VARCHAR, number INTEGER, trigger VARCHAR, started_at TIMESTAMPTZ,
        duration_ms INTEGER, response_code INTEGER, error VARCHAR, excerpt TEXT,
        retry_after VARCHAR, was VARCHAR, status VARCHAR, next_attempt_at TIMESTAMPTZ,
        asked BOOLEAN, ordering_key VARCHAR)"""
_INSERT_ATTEMPTS = text(
    f"""
    INSERT INTO attempts (delivery_id, number, trigger, started_at, duration_ms,
        response_code, error, excerpt, retry_after)
    SELECT m.id, m.number, m.trigger, m.started_at, m.duration_ms, m.response_code,
        {rows.ANSWER_KEPT}
    FROM {_RESULTS}
    JOIN deliveries ON deliveries.id = m.id
    JOIN events ON events.id = deliveries.event_id
    WHERE {_BATCH}
    """  # noqa: S608 (constants of ours, not input)
)
_MOVE = text(
    f"""
    UPDATE deliveries SET {rows.MOVED}
    FROM {_RESULTS}
    WHERE {_BATCH} AND {rows.STILL_AS_READ}
    RETURNING deliveries.id
    """  # noqa: S608 (constants of ours, not input)
).bindparams(rows.NOW)
# Each line's first delivery found through the lines' index, LIMIT 1 (a LATERAL: never a
# read of a whole line).
_RELEASE = text(
    f"""
    UPDATE deliveries SET {rows.RELEASED}
    FROM json_to_recordset(CAST(:lines AS JSON)) AS p (
        endpoint_id VARCHAR, ordering_key VARCHAR, missed BIGINT)
    CROSS JOIN LATERAL (
        SELECT delivery_id FROM ordered_lines AS l
        WHERE l.endpoint_id = p.endpoint_id AND l.ordering_key = p.ordering_key
        ORDER BY l.sequence
        LIMIT 1) AS f
    WHERE deliveries.id = f.delivery_id AND {rows.RELEASING}
    RETURNING deliveries.endpoint_id
    """  # noqa: S608 (constants of ours, not input)
).bindparams(rows.NOW)


# The heads marked due. The endpoints go in their order (each head is locked as it is
# written, so concurrent publishes lock in one order).
_MARK_DUE = upsert_heads(
    insert(tables.queue_heads).from_select(
        ["endpoint_id", "next_due_at"],
        select(func.unnest(bindparam("endpoints", type_=ARRAY(String))), rows.NOW),
    )
)


class PostgresQueue(Queue):
    _insert_attempts = _INSERT_ATTEMPTS
    _move = _MOVE
    _release = _RELEASE

    def __init__(self) -> None:
        super().__init__(_PENDING)

    def mark_due(
        self, connection: Connection, endpoint_ids: Collection[str], now: datetime
    ) -> None:
        """The heads written; the workers told after the commit, never inside it (a notice
        in a writer's transaction made concurrent commits wait for one another: issue 38)."""
        if endpoint_ids:
            connection.execute(_MARK_DUE, {"endpoints": sorted(endpoint_ids), "now": now})
            notices.after_commit(connection, CHANNEL, endpoint_ids)

    def wake(self, connection: Connection, endpoint_ids: Collection[str]) -> None:
        notices.after_commit(connection, CHANNEL, endpoint_ids)

    def changed(self, connection: Connection, endpoint_ids: Collection[str]) -> None:
        notices.after_commit(connection, CHANGED_CHANNEL, endpoint_ids)

    def rows(self, connection: Connection, now: datetime, wants: Mapping[str, Want]) -> list[Row]:
        if not wants:
            return []
        document = rows.document(
            [
                {
                    "endpoint_id": endpoint_id,
                    "count": want.count,
                    "after_due": want.after[0],
                    "after_id": want.after[1],
                    "held": list(want.held),
                }
                for endpoint_id, want in wants.items()
            ]
        )
        found = connection.execute(_JOBS, {"wants": document, "now": now})
        return [tuple(row) for row in found.all()]

    def link(self, sessions: sessionmaker[Session]) -> Link:
        return PostgresLink(sessions)


class PostgresLink(Link):
    """Every step on the event loop, each on a connection of its own (records overlap
    claims: they touch disjoint rows), woken by ``NOTIFY``. The steps are the services'
    synchronous code, run by ``greenlet_spawn`` over psycopg's asynchronous connections (as
    SQLAlchemy's ``run_sync`` does): waiting for PostgreSQL, a step gives the loop back, and
    no thread of the worker trades the interpreter's lock with the loop's (with threads, the
    worker spent more CPU a delivery and its loop waited longer for one: ADR 0008, session
    14)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._engine = database.worker_engine_async(database.url_of(sessions))
        super().__init__(database.sessions(self._engine.sync_engine))

    async def close(self) -> None:
        await self._engine.dispose()

    async def _run(self, step: Step, call: Callable[[], T]) -> T:  # noqa: ARG002 (one way for all)
        return await greenlet_spawn(call)

    async def listen(self, wake: Wake) -> None:
        """Each notification names the endpoints with deliveries due, or (on its own
        channel) that changed; on (re)connecting, any may have."""
        url = database.url_of(self.sessions).set(drivername="postgresql")
        conninfo = url.render_as_string(hide_password=False)
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    await conn.execute(f"LISTEN {CHANGED_CHANNEL}")
                    wake(None, True)
                    async for notify in conn.notifies():
                        wake(notify.payload.split(), notify.channel == CHANGED_CHANNEL)
            except psycopg.Error:
                log.warning("LISTEN connection lost; polling until it is back")
                await asyncio.sleep(RECONNECT_AFTER)
