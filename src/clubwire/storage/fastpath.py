"""The API request path's one round trip, on the plain driver (DESIGN §8).

Everything an API request needs to decide is read in one indexed query: the key's hash,
scopes, revocation and expiry, the club's module switch and its programs version. Nothing is
cached here, so a revocation is seen by the very next request in every process.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import psycopg
from sqlalchemy.engine import make_url

from clubwire.storage import database

_KEY_QUERY = """
SELECT k.id, k.secret_hash, k.scopes, k.revoked_at IS NOT NULL, k.expires_at,
       c.id, c.webhooks_enabled, c.programs_version
FROM api_keys AS k JOIN clubs AS c ON c.id = k.club_id
WHERE k.prefix = {prefix} AND c.slug = {slug}
"""


Connection = psycopg.AsyncConnection[tuple[Any, ...]]


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
    less than handing it to a thread would."""

    _query = _KEY_QUERY.format(prefix="?", slug="?")

    def __init__(self, path: str) -> None:
        self._connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._connection.execute("PRAGMA busy_timeout=1000")
        self._connection.execute("PRAGMA query_only=ON")

    async def key_row(self, slug: str, prefix: str) -> KeyRow | None:
        return _row(self._connection.execute(self._query, (prefix, slug)).fetchone())

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


async def open_reader(sqlalchemy_url: str) -> Reader:
    url = make_url(sqlalchemy_url)
    if url.get_backend_name() == "sqlite":
        return SqliteReader(url.database or ":memory:")
    libpq = url.set(drivername="postgresql").render_as_string(hide_password=False)
    return await PostgresReader.open(libpq, database.postgres_connect_args(url, worker=False))
