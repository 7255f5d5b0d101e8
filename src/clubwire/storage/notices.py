"""PostgreSQL notices (``NOTIFY``) sent after the commit of the transaction they tell of, by
one thread per process on a connection of its own (ADR 0008, issue 38).

A transaction that has queued a notice takes, as it commits, one lock for the whole
PostgreSQL instance (so that notices keep commit order), and holds it until the commit is
flushed: every publish notifying in its own transaction made concurrent publishes commit one
at a time. Here a writer only notes, on its connection, what to tell (``after_commit``); as
its session's transaction commits, the notes go to this process's notifier, which sends
them on a connection of its own: from the committing thread when it can, else from its
thread, merged with whatever gathered meanwhile, in one statement. Only the notifier's
short transactions take the lock, one process's at a time. A rolled-back transaction's notes
are dropped.

A notice is at most once: a process that dies between a commit and its notice, or a
notifier that cannot reach the database, loses it. What listens must not depend on it
alone: an idle worker looks for due work at least every ``worker.loop.SAFETY_POLL`` (30 s);
the API processes read the change counter every ``fastpath.CHECK_EVERY`` (1 s).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Collection, Iterator
from typing import Any

import psycopg
from sqlalchemy import Connection, event
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session, SessionTransaction

from clubwire.storage import database

# NOTIFY payloads are at most 8,000 bytes: words (endpoint ids, at most 32 characters) go in
# chunks of this many.
WORDS_PER_NOTICE = 200
NOTIFIER = "clubwire-notices"  # the notifier's connection's application_name
CLOSE_IDLE_AFTER = 10.0  # seconds a connection goes unused before it is closed
FLUSH_AT_EXIT = 2.0  # seconds at most that a process's exit waits for its last notices

# A notice's transaction holds the instance's notify lock until its commit is flushed, and
# nothing needs it flushed (it tells of commits flushed already): it does not wait for that.
_OPTIONS = "-c synchronous_commit=off"
_PENDING = "clubwire.notices"  # a connection's info: {channel: words} of its transaction
_TAKEN = "clubwire.notices.taken"  # a session's info: its connections' pending notes
_SEND = """SELECT pg_notify(n.channel, n.payload)
FROM unnest(%s::text[], %s::text[]) AS n (channel, payload)"""

Notes = dict[str, set[str]]
log = logging.getLogger(__name__)


def after_commit(connection: Connection, channel: str, words: Collection[str]) -> None:
    """Tell ``words`` (space-separated) on ``channel`` once the transaction ``connection``
    is in commits, within a session; nothing if it rolls back. Nothing on SQLite."""
    if words and connection.dialect.name == "postgresql":
        connection.info.setdefault(_PENDING, {}).setdefault(channel, set()).update(words)


def flush(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the notices handed over so far to be sent (or
    given up); whether they were."""
    return _notifier.flush(timeout)


def _chunks(words: Collection[str]) -> Iterator[str]:
    ordered = sorted(words)
    for start in range(0, len(ordered), WORDS_PER_NOTICE):
        yield " ".join(ordered[start : start + WORDS_PER_NOTICE])


@event.listens_for(Session, "after_begin")
def _began(session: Session, transaction: SessionTransaction, connection: Connection) -> None:
    """A root transaction starts on ``connection``: its notes start empty (a rolled-back
    transaction's are dropped here at the latest) and are the session's to send."""
    if transaction.parent is None and connection.dialect.name == "postgresql":
        pending: Notes = connection.info.setdefault(_PENDING, {})
        pending.clear()
        session.info.setdefault(_TAKEN, []).append((connection.engine.url, pending))


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    if session.in_nested_transaction():  # a savepoint's release: the root is still open
        return
    for url, pending in session.info.pop(_TAKEN, ()):
        if pending:
            _notifier.send(url, {channel: set(words) for channel, words in pending.items()})
            pending.clear()


@event.listens_for(Session, "after_transaction_end")
def _ended(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # rolled back, or committed and sent already
        for _, pending in session.info.pop(_TAKEN, ()):
            pending.clear()


@functools.cache
def _conninfo(url: URL) -> str:
    """The database's address for psycopg, worked out once per engine's URL (every commit
    that notifies asks)."""
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


class _Notifier:
    """The process's sender, on a connection per database it keeps (closed after
    ``CLOSE_IDLE_AFTER`` seconds with nothing to send). The committing thread sends its own
    notes when no send is under way and it is not an event loop's (a web request's thread, a
    CLI): handed to another thread, a notice waited for the interpreter's lock as long as the
    committing process kept it busy (10 ms of a request's work after its commit made a
    wake-up 10 ms late). Otherwise the notes go to the notifier's thread, which merges what
    was handed to it while it was sending and sends it in one statement."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[str, Notes] | threading.Event] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._sending = threading.Lock()  # held by whoever uses the connections
        self._pid: int | None = None  # the process the thread runs in (none after a fork)
        self._connections: dict[str, psycopg.Connection[tuple[Any, ...]]] = {}
        self._used: dict[str, float] = {}  # when each connection was last used

    def send(self, url: URL, notes: Notes) -> None:
        self._start()
        conninfo = _conninfo(url)
        if _on_event_loop() or not self._sending.acquire(blocking=False):
            self._queue.put((conninfo, notes))
            return
        try:
            self._send(conninfo, notes)
        finally:
            self._sending.release()

    def flush(self, timeout: float) -> bool:
        if self._pid != os.getpid():
            return True  # nothing was handed over in this process
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def _start(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._connections, self._used = {}, {}
            self._sending = threading.Lock()
            threading.Thread(target=self._run, name=NOTIFIER, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=CLOSE_IDLE_AFTER)
            except queue.Empty:
                with self._sending:
                    self._close_idle()
                continue
            gathered, flushes = self._gather(first)
            with self._sending:
                for conninfo, notes in gathered.items():
                    self._send(conninfo, notes)
            for done in flushes:
                done.set()

    def _gather(
        self, first: tuple[str, Notes] | threading.Event
    ) -> tuple[dict[str, Notes], list[threading.Event]]:
        """What is waiting, merged per database and channel; and the flushes waiting."""
        gathered: dict[str, Notes] = {}
        flushes: list[threading.Event] = []
        item: tuple[str, Notes] | threading.Event | None = first
        while item is not None:
            if isinstance(item, threading.Event):
                flushes.append(item)
            else:
                merged = gathered.setdefault(item[0], {})
                for channel, words in item[1].items():
                    merged.setdefault(channel, set()).update(words)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                item = None
        return gathered, flushes

    def _send(self, conninfo: str, notes: Notes) -> None:
        """Send, on a new connection once more if the kept one failed (the server restarted
        since); else give up: whoever listens finds the work by polling."""
        channels = [channel for channel, words in notes.items() for _ in _chunks(words)]
        payloads = [chunk for words in notes.values() for chunk in _chunks(words)]
        for attempt in range(2):
            try:
                connection = self._connection(conninfo)
                connection.execute(_SEND, (channels, payloads))
                return
            except psycopg.Error as error:
                self._close(conninfo)
                if attempt:
                    log.warning("could not send notices after a commit: %s", error)

    def _connection(self, conninfo: str) -> psycopg.Connection[tuple[Any, ...]]:
        connection = self._connections.get(conninfo)
        if connection is None:
            connection = psycopg.connect(
                conninfo,
                autocommit=True,
                application_name=NOTIFIER,
                connect_timeout=database.CONNECT_TIMEOUT,
                options=_OPTIONS,
            )
            self._connections[conninfo] = connection
        self._used[conninfo] = time.monotonic()
        return connection

    def _close(self, conninfo: str) -> None:
        self._used.pop(conninfo, None)
        connection = self._connections.pop(conninfo, None)
        if connection is not None:
            connection.close()

    def _close_idle(self) -> None:
        """Close the connections no send used for ``CLOSE_IDLE_AFTER`` seconds."""
        idle_since = time.monotonic() - CLOSE_IDLE_AFTER
        for conninfo in [c for c, used in self._used.items() if used < idle_since]:
            self._close(conninfo)


def _on_event_loop() -> bool:
    """Whether this thread runs an event loop (a worker's steps): it must not wait."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


_notifier = _Notifier()
atexit.register(flush, FLUSH_AT_EXIT)
