"""Engines and sessions for the ORM side (services, CLI, internal API)."""

from __future__ import annotations

import functools
import logging
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import psycopg
import sqlalchemy.exc
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import Pool

from clubwire.errors import ConfigurationError
from clubwire.settings import Settings

SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
)
# A worker's own SQLite connections (its queue link) also keep their temporary files in memory
# (each multi-row record statement opened a statement journal on disk: a third of the file
# writes of a batch), checkpoint the write-ahead log every 10,000 pages rather than 1,000 (the
# index pages every batch dirties again are copied back to the file once, not each time) and
# cache 32 MiB of pages rather than 2 MiB. A batch of records, per delivery: 61 → 40 µs of
# CPU (ADR 0008, session 18). Their statements are small batches, so the memory is bounded.
WORKER_SQLITE_PRAGMAS = (
    "PRAGMA temp_store=MEMORY",
    "PRAGMA wal_autocheckpoint=10000",
    "PRAGMA cache_size=-32768",
)


# The worker's statements need RETURNING (3.35) and UPDATE … FROM (3.33).
SQLITE_OLDEST = (3, 35, 0)

# A worker's PostgreSQL connections: no ping before each use (a dead connection fails one
# claim or record, which is retried), commits that do not wait for the WAL flush (a claim or
# record lost in a server crash only means a delivery sent again; ADR 0004), and no JIT: its
# statements are short, but with a million due deliveries their estimated cost passes
# jit_above_cost and compiling took 223 of a claim's 311 ms (45 ms without; issue 12).
WORKER_POSTGRES_OPTIONS = {"options": "-c synchronous_commit=off -c jit=off"}
WORKER_POSTGRES_ENGINE: dict[str, Any] = {"pool_recycle": 300, "hide_parameters": True}
# The services' PostgreSQL connections (web, CLI) are pinged before use only after waiting
# in the pool this many seconds: a ping before every use (``pool_pre_ping``) was a round trip
# of every request, an eighth of a publish's (issue 38). Under load a connection comes back
# into use within milliseconds; one that waited through a restart (longer than this) is
# pinged and replaced, so the very next requests succeed. A connection whose session ended
# within this time of its last use (a backend killed under load) fails one request (503),
# and the pool then replaces every connection it holds.
PING_AFTER_IDLE = 0.1
_RETURNED = "clubwire.returned"  # in a pooled connection's info: when it came back
# Seconds to wait for a PostgreSQL connection (unless the URL says): an unreachable host is a
# clear error (and /readyz a 503) in that time, not a wait for the operating system to give up.
CONNECT_TIMEOUT = 10

# What says "not now" rather than "wrong" (``unavailable``). SQLite's primary result codes: busy
# or locked past the busy timeout, the file cannot be opened, an I/O error. PostgreSQL's
# SQLSTATE prefixes: connection exceptions (08), insufficient resources such as too many
# connections or a full disk (53), and the server shutting down or starting up (57P01-57P05;
# not 57014, a cancelled statement).
SQLITE_UNAVAILABLE = frozenset(
    {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR}
)
POSTGRES_UNAVAILABLE = ("08", "53", "57P")
# A transaction that lost a race with another, which the same work run again would not lose
# (or not twice): a serialization failure or a deadlock (SQLSTATE 40001, 40P01). ``transact``
# runs it again ``CONFLICT_ATTEMPTS`` times in all, after a pause of up to ``CONFLICT_PAUSE``
# seconds times the attempts made (so that the two sides do not meet again at once); one that
# still conflicts is ``unavailable`` (a 503 with Retry-After, never a 500).
POSTGRES_CONFLICTS = frozenset({"40001", "40P01"})
CONFLICT_ATTEMPTS = 4
CONFLICT_PAUSE = 0.02

T = TypeVar("T")
P = ParamSpec("P")
log = logging.getLogger(__name__)


def engine_for(settings: Settings, worker: bool = False) -> Engine:
    """An engine for the configured database; SQLite gets WAL and foreign keys. Its errors
    never quote the statement's parameters: they hold receivers' answers, sealed secrets and
    key hashes, and errors end up in logs."""
    url = make_url(settings.sqlalchemy_url)
    if url.get_backend_name() != "sqlite":
        args = postgres_connect_args(url, worker)
        if worker:
            return create_engine(url, connect_args=args, **WORKER_POSTGRES_ENGINE)
        engine = create_engine(url, connect_args=args, hide_parameters=True)
        event.listen(engine, "checkin", _checked_in)
        event.listen(engine, "checkout", functools.partial(_ping_if_idle, engine))
        return engine
    require_sqlite(sqlite3.sqlite_version_info)
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    return sqlite_engine(url)


def _checked_in(_dbapi_connection: Any, record: Any) -> None:
    record.info[_RETURNED] = time.monotonic()


def _ping_if_idle(engine: Engine, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    """Ping a connection that waited in the pool more than ``PING_AFTER_IDLE`` seconds; one
    that fails is replaced by the pool (``DisconnectionError``)."""
    returned = record.info.get(_RETURNED)
    if returned is None or time.monotonic() - returned <= PING_AFTER_IDLE:
        return
    try:
        engine.dialect.do_ping(dbapi_connection)
    except psycopg.Error as error:
        raise sqlalchemy.exc.DisconnectionError(str(error)) from error


def worker_engine_async(url: URL) -> AsyncEngine:
    """A worker's engine on the PostgreSQL database at ``url``, with psycopg's asynchronous
    connections and the worker's options; synchronous code uses its ``sync_engine`` inside
    ``greenlet_spawn`` (``storage.queue.postgres``)."""
    args = postgres_connect_args(url, worker=True)
    return create_async_engine(url, connect_args=args, **WORKER_POSTGRES_ENGINE)


def sqlite_engine(url: URL, pool: type[Pool] | None = None, worker: bool = False) -> Engine:
    """An engine on the SQLite file at ``url`` (WAL, foreign keys, a busy timeout; for a
    ``worker``, its pragmas too), with the default pool unless ``pool`` is given."""
    engine = create_engine(url, hide_parameters=True, poolclass=pool)
    pragmas = SQLITE_PRAGMAS + WORKER_SQLITE_PRAGMAS if worker else SQLITE_PRAGMAS
    event.listen(engine, "connect", functools.partial(_sqlite_on_connect, pragmas))
    return engine


def require_sqlite(version: tuple[int, int, int]) -> None:
    """Refuse an SQLite library too old for the worker's statements, saying which."""
    if version < SQLITE_OLDEST:
        found, oldest = (".".join(map(str, v)) for v in (version, SQLITE_OLDEST))
        raise ConfigurationError(
            f"SQLite {oldest} or later is needed, and this Python uses SQLite {found}: "
            "use a Python built with a newer SQLite, or PostgreSQL"
        )


def postgres_connect_args(url: URL, worker: bool) -> dict[str, Any]:
    """What psycopg connects with, beyond the URL: the connect timeout (unless the URL has
    one), and for a worker its options."""
    args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        args["connect_timeout"] = CONNECT_TIMEOUT
    return args | WORKER_POSTGRES_OPTIONS if worker else args


def unavailable(error: BaseException) -> bool:
    """Whether ``error`` says the database cannot be used right now (unreachable, shutting down,
    out of connections, locked past its busy timeout), so that the same work may succeed in a
    few seconds; a programming error or a broken constraint is not that."""
    if isinstance(error, sqlalchemy.exc.TimeoutError):  # no pooled connection came free in time
        return True
    if isinstance(error, sqlalchemy.exc.DBAPIError):
        return error.connection_invalidated or _driver_unavailable(error.orig)
    return _driver_unavailable(error)


def _driver_unavailable(error: BaseException | None) -> bool:
    if isinstance(error, sqlite3.OperationalError):
        return error.sqlite_errorcode & 0xFF in SQLITE_UNAVAILABLE
    if _driver_conflicted(error):  # lost a race to the last try (psycopg: OperationalError)
        return True
    if isinstance(error, psycopg.OperationalError):  # no SQLSTATE: the connection failed or broke
        return error.sqlstate is None or error.sqlstate.startswith(POSTGRES_UNAVAILABLE)
    return False


def conflicted(error: BaseException) -> bool:
    """Whether ``error`` says the transaction lost a race with another (a serialization
    failure, a deadlock), so that running it again should succeed."""
    return isinstance(error, sqlalchemy.exc.DBAPIError) and _driver_conflicted(error.orig)


def _driver_conflicted(error: BaseException | None) -> bool:
    return isinstance(error, psycopg.Error) and error.sqlstate in POSTGRES_CONFLICTS


def transact(
    sessions: sessionmaker[Session],
    work: Callable[Concatenate[Session, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """``work(session, *args, **kwargs)`` in one transaction, committed when it returns; run
    again in a fresh transaction when it lost a race with another (``conflicted``), up to
    ``CONFLICT_ATTEMPTS`` times in all. Anything else, and the last conflict, reaches the
    caller."""
    attempt = 1
    while True:
        try:
            with sessions.begin() as session:
                return work(session, *args, **kwargs)
        except sqlalchemy.exc.DBAPIError as error:
            if attempt >= CONFLICT_ATTEMPTS or not conflicted(error):
                raise
            why = type(error.orig).__name__
            log.info("a transaction lost a race (%s); running it again", why)
        time.sleep(random.uniform(0, CONFLICT_PAUSE * attempt))
        attempt += 1


def _sqlite_on_connect(pragmas: tuple[str, ...], dbapi_connection: Any, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in pragmas:
        cursor.execute(pragma)
    cursor.close()


def insert_if_absent(
    session: Session, model: type[Any], **values: object
) -> postgresql.Insert | sqlite.Insert:
    """An INSERT of ``values`` into ``model``'s table that does nothing where a row with the
    same key exists (waiting, on PostgreSQL, for a transaction inserting it to end)."""
    insert = insert_of(session.get_bind().dialect.name)
    return insert(model).values(**values).on_conflict_do_nothing()


def insert_of(dialect_name: str) -> Callable[[Any], postgresql.Insert | sqlite.Insert]:
    """The ``insert`` of the database whose dialect is ``dialect_name``: its own, for an
    ``ON CONFLICT`` clause."""
    return _INSERT[dialect_name]


_INSERT: dict[str, Callable[[Any], postgresql.Insert | sqlite.Insert]] = {
    "postgresql": postgresql.insert,
    "sqlite": sqlite.insert,
}


def sessions(engine: Engine) -> sessionmaker[Session]:
    """The session factory: use ``with sessions.begin() as session:`` for one transaction."""
    return sessionmaker(engine, expire_on_commit=False)


def url_of(sessions: sessionmaker[Session]) -> URL:
    """The database URL of a session factory made by ``sessions``."""
    engine: Engine = sessions.kw["bind"]
    return engine.url
