"""Who is calling the club data API, and the bytes it answers with: the hot path.

A key whose checksum fails is refused before any database read. Then one indexed read per
request decides everything (``storage.fastpath``); the club's program list is cached per
process as bytes, keyed by the version number read in that same round trip, so a change on
any process is seen by the next request everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from clubwire import errors
from clubwire.domain import key_format, scopes, timestamps
from clubwire.domain.recent import Recent
from clubwire.services import programs
from clubwire.services.club_api import keys
from clubwire.storage import fastpath

KEY_IN_URL = (
    "Send the API key in an Authorization: Bearer header; keys in the URL are not accepted, "
    "and this one may now be in logs along the way: consider revoking it."
)


@dataclass(frozen=True, slots=True)
class ApiClient:
    """Who sent a request, as the server sees it: recorded as the key's last use."""

    address: str | None
    user_agent: str | None


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated API request: which club, which key."""

    club_id: str
    key_id: str
    prefix: str
    programs_version: int


class LacksScope(errors.InsufficientScope):
    """The key authenticated, as ``caller``, but lacks the scope: its request still counts
    against its key's and its club's rate limits."""

    def __init__(self, scope: str, caller: Caller) -> None:
        super().__init__(scope)
        self.caller = caller


class ApiAccess:
    """Keeps at most ``kept_listings`` clubs' program listings and, for ``kept_keys`` keys,
    when their use was last written, the most recently used (``CLUBWIRE_API_KEPT_…``)."""

    def __init__(
        self,
        reader: fastpath.Reader,
        sessions: sessionmaker[Session],
        clock: Callable[[], datetime],
        kept_listings: int,
        kept_keys: int,
    ) -> None:
        self._reader = reader
        self._sessions = sessions
        self._clock = clock
        self._listings: Recent[str, tuple[int, bytes]] = Recent(kept_listings)
        self._last_noted: Recent[str, datetime] = Recent(kept_keys)

    async def authorize(
        self,
        slug: str,
        authorization: str | None,
        scope: str,
        query: bytes = b"",
        client: ApiClient | None = None,
    ) -> Caller:
        """The caller behind ``authorization`` at this club, holding ``scope``; else raises.

        ``client`` (address and User-Agent) is recorded as the key's last use.
        """
        parsed = _presented_key(authorization, query)
        row = await self._reader.key_row(slug, parsed.prefix)
        if row is None or not key_format.matches(parsed.secret, row.secret_hash):
            raise errors.Unauthenticated(_UNKNOWN)
        now = self._clock()
        _check(row, now)
        caller = Caller(row.club_id, row.key_id, parsed.prefix, row.programs_version)
        if scope not in scopes.decode(row.scopes):
            raise LacksScope(scope, caller)
        await self._note_use(row.key_id, now, client)
        return caller

    async def programs_body(self, caller: Caller) -> bytes:
        cached = self._listings.get(caller.club_id)
        if cached is not None and cached[0] == caller.programs_version:
            return cached[1]
        body = await run_in_threadpool(self._load_listing, caller.club_id)
        self._listings.keep(caller.club_id, (caller.programs_version, body))
        return body

    async def close(self) -> None:
        await self._reader.close()

    def _load_listing(self, club_id: str) -> bytes:
        with self._sessions() as session:
            return programs.public_listing(session, club_id)

    async def _note_use(self, key_id: str, now: datetime, client: ApiClient | None) -> None:
        last = self._last_noted.get(key_id)
        if last is not None and now - last < keys.LAST_USED_RESOLUTION:
            return
        self._last_noted.keep(key_id, now)
        await run_in_threadpool(self._write_use, key_id, now, client or _UNKNOWN_CLIENT)

    def _write_use(self, key_id: str, now: datetime, client: ApiClient) -> None:
        with self._sessions.begin() as session:
            keys.note_use(session, key_id, now, client.address, client.user_agent)


def _presented_key(authorization: str | None, query: bytes) -> key_format.ParsedKey:
    """The key in the ``Authorization`` header, checked as far as it can be without the
    database: there, key-shaped, its checksum right; else raises."""
    token = key_format.bearer_token(authorization)
    if token is None:
        raise errors.MissingCredentials(KEY_IN_URL if _KEY_TAG in query else None)
    parsed = key_format.parse(token)
    if parsed is None:
        raise errors.Unauthenticated(_MALFORMED)
    if not key_format.checksum_holds(parsed):
        raise errors.Unauthenticated(_BAD_CHECKSUM)
    return parsed


def _check(row: fastpath.KeyRow, now: datetime) -> None:
    """Raises unless the key, found and matching, may be used at ``now``."""
    if row.revoked:
        raise errors.Unauthenticated("This API key has been revoked.")
    if key_format.expired(row.expires_at, now):
        expired_at = timestamps.to_wire_or_none(row.expires_at)
        raise errors.Unauthenticated(f"This API key expired at {expired_at}.")
    if not row.module_on:
        raise errors.Unauthenticated("Webhooks & API are not enabled for this club.")


_UNKNOWN_CLIENT = ApiClient(address=None, user_agent=None)
_KEY_TAG = key_format.TAG.encode()
_MALFORMED = (
    "The Authorization header does not hold a clubwire API key (cw_live_<prefix>_<secret>)."
)
_BAD_CHECKSUM = (
    "This is not a valid clubwire API key: its checksum does not match "
    "(is it mistyped or cut short?)."
)
_UNKNOWN = "This API key is not known at this club."
