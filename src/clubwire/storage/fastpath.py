"""The API request path's one round trip, on the plain driver (DESIGN §8).

Everything an API request needs to decide is read in one indexed query: the key's hash,
scopes and revocation, the club's module switch and its programs version. Nothing is
cached here, so a revocation is seen by the very next request in every process.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Protocol

from psycopg_pool import AsyncConnectionPool
from sqlalchemy.engine import make_url

_KEY_QUERY = """
SELECT k.id, k.secret_hash, k.scopes, k.revoked_at IS NOT NULL,
       c.id, c.webhooks_enabled, c.programs_version
FROM api_keys AS k JOIN clubs AS c ON c.id = k.club_id
WHERE k.prefix = {prefix} AND c.slug = {slug}
"""


@dataclass(frozen=True, slots=True)
class KeyRow:
    key_id: str
    secret_hash: str
    scopes: str
    revoked: bool
    club_id: str
    module_on: bool
    programs_version: int


class Reader(Protocol):
    async def key_row(self, slug: str, prefix: str) -> KeyRow | None: ...
    async def close(self) -> None: ...


def _row(values: tuple[object, ...] | None) -> KeyRow | None:
    if values is None:
        return None
    key_id, secret_hash, scopes, revoked, club_id, module_on, version = values
    return KeyRow(
        str(key_id),
        str(secret_hash),
        str(scopes),
        bool(revoked),
        str(club_id),
        bool(module_on),
        int(version),  # type: ignore[call-overload]
    )


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
    """Reads through a small pool of async psycopg connections (prepared after first use)."""

    _query = _KEY_QUERY.format(prefix="%s", slug="%s")

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    @classmethod
    async def open(cls, url: str, max_size: int = 10) -> PostgresReader:
        pool = AsyncConnectionPool(
            url, min_size=1, max_size=max_size, open=False, kwargs={"autocommit": True}
        )
        await pool.open(wait=True)
        return cls(pool)

    async def key_row(self, slug: str, prefix: str) -> KeyRow | None:
        async with self._pool.connection() as connection:
            cursor = await connection.execute(self._query, (prefix, slug))
            return _row(await cursor.fetchone())

    async def close(self) -> None:
        await self._pool.close()


async def open_reader(sqlalchemy_url: str) -> Reader:
    url = make_url(sqlalchemy_url)
    if url.get_backend_name() == "sqlite":
        return SqliteReader(url.database or ":memory:")
    libpq = url.set(drivername="postgresql").render_as_string(hide_password=False)
    return await PostgresReader.open(libpq)
