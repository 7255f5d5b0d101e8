"""Who is calling the club data API, and the bytes it answers with: the hot path.

One indexed read per request decides everything (``storage.fastpath``); the club's program
list is cached per process as bytes, keyed by the version number read in that same round
trip, so a change on any process is seen by the next request everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from clubwire import errors
from clubwire.domain import key_format, scopes
from clubwire.services import keys as key_service
from clubwire.services import programs
from clubwire.storage import fastpath

KEY_IN_URL = (
    "Send the API key in an Authorization: Bearer header; keys in the URL are not accepted, "
    "and this one may now be in logs along the way: consider revoking it."
)


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated API request: which club, which key."""

    club_id: str
    key_id: str
    prefix: str
    programs_version: int


class ApiAccess:
    def __init__(
        self,
        reader: fastpath.Reader,
        sessions: sessionmaker[Session],
        clock: Callable[[], datetime],
    ) -> None:
        self._reader = reader
        self._sessions = sessions
        self._clock = clock
        self._listings: dict[str, tuple[int, bytes]] = {}
        self._last_noted: dict[str, datetime] = {}

    async def authorize(
        self, slug: str, authorization: str | None, scope: str, query: bytes = b""
    ) -> Caller:
        """The caller behind ``authorization`` at this club, holding ``scope``; else raises."""
        token = key_format.bearer_token(authorization)
        if token is None:
            raise errors.MissingCredentials(KEY_IN_URL if _KEY_TAG in query else None)
        parsed = key_format.parse(token)
        if parsed is None:
            raise errors.Unauthenticated(_MALFORMED)
        row = await self._reader.key_row(slug, parsed.prefix)
        if row is None or not key_format.matches(parsed.secret, row.secret_hash):
            raise errors.Unauthenticated(_UNKNOWN)
        if row.revoked:
            raise errors.Unauthenticated("This API key has been revoked.")
        if not row.module_on:
            raise errors.Unauthenticated("Webhooks & API are not enabled for this club.")
        if scope not in scopes.decode(row.scopes):
            raise errors.InsufficientScope(scope)
        await self._note_use(row.key_id)
        return Caller(row.club_id, row.key_id, parsed.prefix, row.programs_version)

    async def programs_body(self, caller: Caller) -> bytes:
        cached = self._listings.get(caller.club_id)
        if cached is not None and cached[0] == caller.programs_version:
            return cached[1]
        body = await run_in_threadpool(self._load_listing, caller.club_id)
        self._listings[caller.club_id] = (caller.programs_version, body)
        return body

    async def close(self) -> None:
        await self._reader.close()

    def _load_listing(self, club_id: str) -> bytes:
        with self._sessions() as session:
            return programs.public_listing(session, club_id)

    async def _note_use(self, key_id: str) -> None:
        now = self._clock()
        last = self._last_noted.get(key_id)
        if last is not None and now - last < key_service.LAST_USED_RESOLUTION:
            return
        self._last_noted[key_id] = now
        await run_in_threadpool(self._write_use, key_id, now)

    def _write_use(self, key_id: str, now: datetime) -> None:
        with self._sessions.begin() as session:
            key_service.note_use(session, key_id, now)


_KEY_TAG = key_format.TAG.encode()
_MALFORMED = (
    "The Authorization header does not hold a clubwire API key (cw_live_<prefix>_<secret>)."
)
_UNKNOWN = "This API key is not known at this club."
