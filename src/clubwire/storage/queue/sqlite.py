"""The delivery queue on SQLite: one statement per lane (no ``LATERAL``), which returns the
lane's jobs as one JSON row; results recorded from JSON documents; and the one worker woken
by another connection's commit to the database file, seen by ``PRAGMA data_version`` (a
read of shared memory: microseconds), whichever process made it."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from datetime import UTC, datetime

import orjson
from sqlalchemy import Connection, bindparam, text
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import SingletonThreadPool

from clubwire.storage import database, tables
from clubwire.storage.queue import rows
from clubwire.storage.queue.heads import Pending, Queue, Row, Want, upsert_heads
from clubwire.storage.queue.link import Link, Step, T, Wake
from clubwire.storage.types import UTCDateTime

# How often the worker looks for another connection's commit: a publish waits half of it,
# on average, before the worker sees it. After a second with no commit (the worker's own
# count), it looks less often, until the next one: an idle worker then costs half as much,
# and the first publish after a quiet spell waits at most ``CHECK_QUIET``.
CHECK_EVERY = 0.02
CHECK_QUIET = 0.05
QUIET_AFTER = 1.0
DATA_VERSION = "PRAGMA data_version"


# The queue's order: the deliveries' partial index ``ix_deliveries_pending``.
_PENDING = Pending(tables.deliveries.c.endpoint_id, tables.deliveries.c.next_attempt_at)

# A lane's due deliveries as one JSON array in one row (bodies in hex, exact for any bytes).
# The sqlite3 module gives up the interpreter lock for every row it steps to, so a row per
# delivery made the claims' thread and the event loop trade the lock once per delivery (ADR
# 0008, session 11). SQLite 3.40's aggregates keep no order: each row carries its due time.
# The lane reads from where its claims have reached (a range of its index), past the ones it
# holds beyond that.
_JOBS = text(
    """
    SELECT json_group_array(json_array(
        id, endpoint_id, kind, hex(body), status, attempt, next_trigger, next_attempt_at,
        ordering_key, missed_sequence, traceparent, tracestate))
    FROM (
        SELECT d.id, d.endpoint_id, e.kind, e.body, d.status, d.attempt, d.next_trigger,
            d.next_attempt_at, d.ordering_key, d.missed_sequence, e.traceparent, e.tracestate
        FROM deliveries AS d JOIN events AS e ON e.id = d.event_id
        WHERE d.endpoint_id = :endpoint AND d.next_attempt_at <= :now
            AND (d.next_attempt_at, d.id) > (:after_due, :after_id)
            AND d.id NOT IN (SELECT value FROM json_each(:held))
        ORDER BY d.next_attempt_at, d.id
        LIMIT :count)
    """
).bindparams(rows.NOW, bindparam("after_due", type_=UTCDateTime()))

# The batch's rows (``m``), each found through the primary key. A subquery, not a ``WITH``:
# Python's sqlite3 opens the transaction only before a statement that begins with INSERT or
# UPDATE, and the two statements of a record must commit together.
_RESULTS = """(
        SELECT
            json_extract(value, '$.id') AS id,
            json_extract(value, '$.number') AS number,
            json_extract(value, '$.trigger') AS trigger,
            json_extract(value, '$.started_at') AS started_at,
            json_extract(value, '$.duration_ms') AS duration_ms,
            json_extract(value, '$.response_code') AS response_code,
            json_extract(value, '$.error') AS error,
            json_extract(value, '$.excerpt') AS excerpt,
            json_extract(value, '$.retry_after') AS retry_after,
            json_extract(value, '$.was') AS was,
            json_extract(value, '$.status') AS status,
            json_extract(value, '$.next_attempt_at') AS next_attempt_at,
            json_extract(value, '$.asked') AS asked,
            json_extract(value, '$.ordering_key') AS ordering_key
        FROM json_each(:results)) AS m"""
_INSERT_ATTEMPTS = text(
    f"""
    INSERT INTO attempts (delivery_id, number, trigger, started_at, duration_ms,
        response_code, error, excerpt, retry_after)
    SELECT m.id, m.number, m.trigger, m.started_at, m.duration_ms, m.response_code,
        {rows.ANSWER_KEPT}
    FROM {_RESULTS}
    JOIN deliveries ON deliveries.id = m.id
    JOIN events ON events.id = deliveries.event_id
    """  # noqa: S608 (constants of ours, not input)
)
_MOVE = text(
    f"""
    UPDATE deliveries SET {rows.MOVED}
    FROM {_RESULTS}
    WHERE {rows.STILL_AS_READ}
    RETURNING deliveries.id
    """  # noqa: S608 (constants of ours, not input)
).bindparams(rows.NOW)
# Each line's first delivery found through the lines' index, by a subquery with LIMIT 1.
_RELEASE = text(
    f"""
    UPDATE deliveries SET {rows.RELEASED}
    FROM (
        SELECT (
            SELECT l.delivery_id FROM ordered_lines AS l
            WHERE l.endpoint_id = json_extract(value, '$.endpoint_id')
                AND l.ordering_key = json_extract(value, '$.ordering_key')
            ORDER BY l.sequence
            LIMIT 1) AS delivery_id,
            json_extract(value, '$.missed') AS missed
        FROM json_each(:lines)) AS p
    WHERE deliveries.id = p.delivery_id AND {rows.RELEASING}
    RETURNING deliveries.endpoint_id
    """  # noqa: S608 (constants of ours, not input)
).bindparams(rows.NOW)


# Built once: building it cost a publish 0.2-0.4 ms.
_MARK_DUE = upsert_heads(insert(tables.queue_heads))


class SqliteQueue(Queue):
    _insert_attempts = _INSERT_ATTEMPTS
    _move = _MOVE
    _release = _RELEASE

    def __init__(self) -> None:
        super().__init__(_PENDING)

    def mark_due(
        self, connection: Connection, endpoint_ids: Collection[str], now: datetime
    ) -> None:
        """The heads are written; the worker sees the commit itself (``listen``)."""
        heads = [{"endpoint_id": e, "next_due_at": now} for e in sorted(endpoint_ids)]
        if heads:
            connection.execute(_MARK_DUE, heads)

    def wake(self, connection: Connection, endpoint_ids: Collection[str]) -> None:
        """Nothing to send: the worker sees the commit itself (``listen``)."""

    def changed(self, connection: Connection, endpoint_ids: Collection[str]) -> None:
        """Nothing to send: the worker sees the commit itself, and then reads every lane's
        endpoint again (``listen``)."""

    def rows(self, connection: Connection, now: datetime, wants: Mapping[str, Want]) -> list[Row]:
        found: list[Row] = []
        for endpoint_id, want in wants.items():
            after_due, after_id = want.after
            values = {
                "endpoint": endpoint_id,
                "count": want.count,
                "now": now,
                "after_due": after_due,
                "after_id": after_id,
                "held": rows.document(list(want.held)),
            }
            lane = orjson.loads(connection.execute(_JOBS, values).scalar_one())
            lane.sort(key=lambda row: (row[7], row[0]))
            found += [
                (row[0], row[1], row[2], bytes.fromhex(row[3]), *row[4:7], _time(row[7]), *row[8:])
                for row in lane
            ]
        return found

    def link(self, sessions: sessionmaker[Session]) -> Link:
        return SqliteLink(sessions)


class SqliteLink(Link):
    """Claims (reads) on a thread and a connection of their own, so that a claim never waits
    behind a write (WAL lets one connection read while another writes); leases and records,
    the worker's writes, on another. SQLite has one writer at a time: with all of the
    worker's writes on one connection, they never wait for one another, and that
    connection's data version changes with other connections' commits only."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._engine = database.sqlite_engine(
            database.url_of(sessions), SingletonThreadPool, worker=True
        )
        claims = ThreadPoolExecutor(1, thread_name_prefix="clubwire-db")
        writes = ThreadPoolExecutor(1, thread_name_prefix="clubwire-db-write")
        self._threads: dict[Step, ThreadPoolExecutor] = {
            "claims": claims,
            "leases": writes,
            "records": writes,
        }
        super().__init__(database.sessions(self._engine))

    async def listen(self, wake: Wake) -> None:
        """Another connection's commit (this process's web requests, the CLI, a second
        ``serve``) may have made deliveries due. A connection of the listener's own sees any
        commit, the worker's too, in microseconds; only then is the writes' connection asked,
        whose data version changes with other connections' commits only, so that the
        worker's own leases and records do not wake it for nothing."""
        path = database.url_of(self.sessions).database or "clubwire.db"
        with closing(sqlite3.connect(path, check_same_thread=False)) as watch:
            commits = _Commits(watch.cursor())
            commits.look()
            try:
                others_seen = None
                while True:
                    await commits.seen()
                    others = await self.recording(self._data_version)
                    if others != others_seen:
                        others_seen = others
                        wake(None, True)
            finally:
                commits.stop()

    async def close(self) -> None:
        for executor in set(self._threads.values()):
            executor.shutdown(wait=True)
        self._engine.dispose()

    async def _run(self, step: Step, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._threads[step], call)

    def _data_version(self) -> int:
        """The data version on the writes' thread's connection."""
        with self._engine.connect() as connection:
            version: int = connection.exec_driver_sql(DATA_VERSION).scalar_one()
            return version


class _Commits:
    """Any connection's commits to the file, looked for every ``CHECK_EVERY`` seconds
    (``CHECK_QUIET`` after ``QUIET_AFTER`` seconds without one) by a timer's callback on the
    event loop: a look that finds none (nearly all of them, idle) wakes no task and makes no
    future, so that an idle worker costs next to nothing."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor
        self._loop = asyncio.get_running_loop()
        self._version: object = None
        self._changed = asyncio.Event()
        self._failed: sqlite3.Error | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0  # when a commit was last seen, event loop time

    def look(self) -> None:
        """Read the data version, and look again soon (less soon after a quiet spell)."""
        try:
            version = self._cursor.execute(DATA_VERSION).fetchone()[0]
        except sqlite3.Error as exc:
            self._failed = exc
            self._changed.set()
            return
        now = self._loop.time()
        if version != self._version:
            self._version, self._last = version, now
            self._changed.set()
        quiet = now - self._last > QUIET_AFTER
        self._timer = self._loop.call_later(CHECK_QUIET if quiet else CHECK_EVERY, self.look)

    async def seen(self) -> None:
        """Until a commit has been seen since the last call (the first look counts as one);
        a look that failed raises here."""
        await self._changed.wait()
        self._changed.clear()
        if self._failed is not None:
            raise self._failed

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _time(stored: str) -> datetime:
    """A time as SQLite stores it (naive UTC text), as an aware datetime."""
    return datetime.fromisoformat(stored).replace(tzinfo=UTC)
