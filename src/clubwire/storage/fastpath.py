"""The API request path's one round trip, on the plain driver (DESIGN §8).

Everything an API request needs to decide is read in one indexed query: the key's hash,
scopes, revocation and expiry, the club's module switch and its programs version. The rows
read are kept in memory while nothing can have changed them: on SQLite until a commit moves
``api_changes.version`` (migration 0022); on PostgreSQL while a listening connection hears
PostgreSQL's notices of every change to them (ADR 0010), and read for every request while it
cannot. So a revocation is
seen by every request that arrives after its commit (SQLite) or its notice (PostgreSQL);
on the process that made the change, by every request after its commit (``changes_api``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import psycopg
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, SessionTransaction, sessionmaker

from clubwire.domain.recent import Recent
from clubwire.storage import database, notices

_KEY_QUERY = """
SELECT k.id, k.secret_hash, k.scopes, k.revoked_at IS NOT NULL, k.expires_at,
       c.id, c.webhooks_enabled, c.programs_version
FROM api_keys AS k JOIN clubs AS c ON c.id = k.club_id
WHERE k.prefix = {prefix} AND c.slug = {slug}
"""

# Moved by triggers whenever what the rows hold changes (migration 0022).
CHANGES_QUERY = "SELECT version FROM api_changes"

Connection = psycopg.AsyncConnection[tuple[Any, ...]]

CHANNEL = "clubwire_api"  # told after the commit of each change_api transaction
LISTENER = "clubwire-api-notices"  # the listening connection's application_name
RECONNECT_AFTER = 1.0  # seconds after the listening connection was lost
# Seconds between reads of the change counter on the listening connection: the longest a
# change no notice told of (made outside clubwire's services, or by a process that died
# between its commit and its notice) stays unseen. It checks the connection is alive too.
CHECK_EVERY = 1.0
_CHANGES_API = "clubwire.changes_api"  # in a session's info: see changes_api

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KeyRow:
    key_id: str
    secret_hash: str
    scopes: str
    revoked: bool
    expires_at: datetime | None
    club_id: str
    module_on: bool
    programs_version: int


def changes_api(session: Session) -> None:
    """Note that ``session``'s transaction changes what authorises an API request (what
    migration 0022's triggers watch). As it ends, this process forgets the rows it keeps,
    before its answer leaves: the next request here needs no notice, which, on a busy
    machine, may come after it. Once it commits, every process is told (on PostgreSQL)."""
    session.info[_CHANGES_API] = True
    notices.after_commit(session.connection(), CHANNEL, [CHANNEL])


class Reader(Protocol):
    async def key_row(self, slug: str, prefix: str) -> KeyRow | None: ...
    async def close(self) -> None: ...


def _row(values: tuple[object, ...] | None) -> KeyRow | None:
    if values is None:
        return None
    key_id, secret_hash, scopes, revoked, expires_at, club_id, module_on, version = values
    return KeyRow(
        str(key_id),
        str(secret_hash),
        str(scopes),
        bool(revoked),
        _moment(expires_at),
        str(club_id),
        bool(module_on),
        int(version),  # type: ignore[call-overload]
    )


def _moment(value: object) -> datetime | None:
    """A stored time as an aware UTC datetime: SQLite keeps ``UTCDateTime`` as naive UTC text,
    PostgreSQL hands over an aware datetime."""
    if value is None:
        return None
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if not isinstance(moment, datetime):
        raise TypeError(f"not a stored time: {value!r}")
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class SqliteReader:
    """Reads in the event loop itself: an indexed SQLite read in WAL mode takes microseconds,
    less than handing it to a thread would. The rows read are kept until a commit to the
    database moves ``api_changes.version`` (migration 0022's triggers, on every change to
    what the rows hold). That number is read only when ``PRAGMA data_version`` moved (any
    commit by any other connection; this one writes nothing), so the API's own frequent
    writes (rate counts, a key's last use) cost a read of one row, not every kept row: a
    revocation, a program change, by any process, is seen by every request that arrives
    after its commit.

    The version is looked at once per turn of the event loop, by its first request: every
    request a turn serves had arrived before that turn began (its bytes were read in this
    turn's poll or an earlier one), so a commit the look did not see is one they arrived
    before. Under load a turn serves several requests, and the look (a few microseconds in
    a busy server, its code and pages cold) is shared by them.
    """

    _query = _KEY_QUERY.format(prefix="?", slug="?")

    def __init__(self, path: str, kept: int) -> None:
        self._connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._connection.execute("PRAGMA busy_timeout=1000")
        self._connection.execute("PRAGMA query_only=ON")
        self._rows: Recent[tuple[str, str], KeyRow] = Recent(kept)
        self._version: object = None  # the database's data_version when last looked at
        self._changes: object = None  # api_changes.version the rows were read at
        self._looked = False  # at the version, in this turn of the event loop

    async def key_row(self, slug: str, prefix: str) -> KeyRow | None:
        if not self._looked:
            self._look()
        row = self._rows.get((slug, prefix))
        if row is None:
            row = _row(self._connection.execute(self._query, (prefix, slug)).fetchone())
            if row is not None:
                self._rows.keep((slug, prefix), row)
        return row

    def _look(self) -> None:
        """Forget the rows if what they hold changed since they were read; look again in
        the next turn of the event loop."""
        version = self._connection.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self._version = version
            changes = self._connection.execute(CHANGES_QUERY).fetchone()[0]
            if changes != self._changes:
                self._rows.clear()
                self._changes = changes
        self._looked = True
        asyncio.get_running_loop().call_soon(self._turn_ended)

    def _turn_ended(self) -> None:
        self._looked = False

    async def close(self) -> None:
        self._connection.close()


class PostgresReader:
    """Reads on a few connections it keeps open (psycopg prepares the query on each after a few
    uses), at most ``max_size`` at a time.

    Not a pool library's pool: while the server is down a read fails at once (connecting is
    refused) instead of waiting while a pool reconnects in the background, logging as it goes.
    A kept connection that fails (the server restarted since) makes it drop every kept one and
    read once more on a new connection, so the first request after an outage succeeds.
    """

    _query = _KEY_QUERY.format(prefix="%s", slug="%s")

    def __init__(self, conninfo: str, options: dict[str, Any], max_size: int = 10) -> None:
        self._conninfo = conninfo
        self._options = options
        self._kept: list[Connection] = []
        self._slots = asyncio.Semaphore(max_size)

    @classmethod
    async def open(cls, conninfo: str, options: dict[str, Any]) -> PostgresReader:
        """A reader with one connection made: a server that cannot be reached fails here."""
        reader = cls(conninfo, options)
        reader._kept.append(await reader._connect())
        return reader

    async def key_row(self, slug: str, prefix: str) -> KeyRow | None:
        async with self._slots:
            if self._kept:
                try:
                    return await self._read(self._kept.pop(), slug, prefix)
                except psycopg.OperationalError:
                    await self._drop_kept()  # as old as the one that failed
            return await self._read(await self._connect(), slug, prefix)

    async def close(self) -> None:
        await self._drop_kept()

    async def _read(self, connection: Connection, slug: str, prefix: str) -> KeyRow | None:
        """One read; the connection is kept after it, or closed if anything went wrong."""
        try:
            cursor = await connection.execute(self._query, (prefix, slug))
            values = await cursor.fetchone()
        except BaseException:
            await connection.close()
            raise
        self._kept.append(connection)
        return _row(values)

    async def _connect(self) -> Connection:
        return await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, **self._options
        )

    async def _drop_kept(self) -> None:
        kept, self._kept = self._kept, []
        for connection in kept:
            await connection.close()


class KeptRows:
    """Key rows kept in memory while a connection listens on ``CHANNEL``: any notice there
    (sent by triggers in the transaction of each change, migration 0010) forgets them all.
    A row read while a notice arrives is not kept (``_generation``): it may predate the
    change. While not listening (connecting, or the connection lost), every request reads.
    Rows not found are never kept, so guessed keys cannot fill the memory, and at most
    ``kept`` are, the most recently used.

    Only the event loop's thread changes the rows (reading one makes it the most recent):
    ``_forget``, which runs in the threads that commit changes too, moves the generation on,
    and the next request forgets the rows before it reads them."""

    def __init__(
        self, reader: PostgresReader, conninfo: str, options: dict[str, Any], kept: int
    ) -> None:
        self._reader = reader
        self._conninfo = conninfo
        self._options = options
        self._rows: Recent[tuple[str, str], KeyRow] = Recent(kept)
        self._generations = itertools.count()  # next() is atomic: _forget runs in threads too
        self._generation = next(self._generations)  # notices heard, and connections lost
        self._rows_of = self._generation  # the generation the rows were kept in
        self._listening = False
        self._lost = False  # a listening connection was lost, and none made since
        self._listener: asyncio.Task[None] | None = None
        self._sessions: sessionmaker[Session] | None = None

    def start(self, sessions: sessionmaker[Session]) -> None:
        """Listen, and forget as each transaction of ``sessions`` that ``changes_api`` ends."""
        event.listen(sessions, "after_transaction_end", self._transaction_ended)
        self._sessions = sessions
        self._listener = asyncio.create_task(self.listen())

    async def key_row(self, slug: str, prefix: str) -> KeyRow | None:
        generation = self._generation
        if generation != self._rows_of:  # forgotten since they were kept
            self._rows.clear()
            self._rows_of = generation
        if self._listening and (row := self._rows.get((slug, prefix))) is not None:
            return row
        row = await self._reader.key_row(slug, prefix)
        if row is not None and self._listening and generation == self._generation:
            self._rows.keep((slug, prefix), row)
        return row

    def kept(self, slug_and_prefix: tuple[str, str]) -> bool:
        """Whether that row is kept: the next request for it reads nothing."""
        current = self._rows_of == self._generation
        return self._listening and current and slug_and_prefix in self._rows

    async def listen(self) -> None:
        """Listen until cancelled: connect, forget, keep rows while notices can arrive; on
        a lost connection, read per request until connected again."""
        while True:
            try:
                await self._listen_once()
            except (psycopg.Error, OSError):
                # No warning of its own: requests go on, reading per request; in an outage
                # each failed request says so already.
                if self._listening:
                    log.debug("lost the API change notices; reading keys per request")
                    self._lost = True
            finally:
                self._listening = False
                self._forget()
            await asyncio.sleep(RECONNECT_AFTER)

    async def close(self) -> None:
        if self._sessions is not None:
            event.remove(self._sessions, "after_transaction_end", self._transaction_ended)
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        await self._reader.close()

    async def _listen_once(self) -> None:
        async with await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, **{**self._options, "application_name": LISTENER}
        ) as connection:
            await connection.execute(f"LISTEN {CHANNEL}")
            self._forget()
            changes = await self._changes(connection)
            self._listening = True
            if self._lost:
                log.info("hearing the API change notices again; keeping key rows")
                self._lost = False
            while True:
                async for _ in connection.notifies(timeout=CHECK_EVERY):
                    self._forget()
                # A change no notice told of; a silent, dead connection raises here.
                seen, changes = changes, await self._changes(connection)
                if changes != seen:
                    self._forget()

    @staticmethod
    async def _changes(connection: Connection) -> object:
        cursor = await connection.execute(CHANGES_QUERY)
        found = await cursor.fetchone()
        return None if found is None else found[0]

    def _transaction_ended(self, session: Session, transaction: SessionTransaction) -> None:
        if transaction.parent is None and session.info.pop(_CHANGES_API, False):
            self._forget()  # rolled back too: reading again is always safe

    def _forget(self) -> None:
        self._generation = next(self._generations)  # the next request forgets the rows


async def open_reader(sqlalchemy_url: str, sessions: sessionmaker[Session], kept: int) -> Reader:
    """The reader for the database, keeping at most ``kept`` key rows; ``sessions`` are this
    process's, whose changes it sees as they are committed."""
    url = make_url(sqlalchemy_url)
    if url.get_backend_name() == "sqlite":
        return SqliteReader(url.database or ":memory:", kept)
    libpq = url.set(drivername="postgresql").render_as_string(hide_password=False)
    options = database.postgres_connect_args(url, worker=False)
    reader = KeptRows(await PostgresReader.open(libpq, options), libpq, options, kept)
    reader.start(sessions)
    return reader
