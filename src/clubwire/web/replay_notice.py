"""What a replay did, carried across its redirect (Post/Redirect/Get) to the Webhooks tab in a
short-lived cookie, shown once on the endpoint it was for.

The cookie holds numbers and an endpoint id, never text: the page words them itself, so a
forged cookie can make it say nothing but a count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from clubwire.domain.replay_window import Replay

COOKIE = "clubwire_replayed"
LIFETIME = 60  # seconds: the redirect follows at once
_VALUE = re.compile(r"^([A-Za-z0-9_]{1,64})\.([0-9]{1,9})\.([0-9]{1,9})$")


@dataclass(frozen=True, slots=True)
class Replayed:
    """A replay's outcome, in words, for the endpoint it was for."""

    endpoint_id: str
    text: str


def remember(
    response: Response, path: str, endpoint_id: str, done: Replay, *, secure: bool
) -> None:
    """Carry ``done`` to the next GET of ``path`` (the Webhooks tab)."""
    value = f"{endpoint_id}.{done.count}.{done.matching}"
    response.set_cookie(
        COOKIE, value, LIFETIME, path=path, secure=secure, httponly=True, samesite="strict"
    )


def taken(request: Request) -> Replayed | None:
    """The outcome the last replay left for this page, if any (a malformed cookie: none)."""
    found = _VALUE.match(request.cookies.get(COOKIE, ""))
    if found is None:
        return None
    endpoint_id, count, matching = found.groups()
    done = Replay(int(count), max(int(count), int(matching)))
    return Replayed(endpoint_id, done.summary(preview=False))


def forget(response: Response, path: str, *, secure: bool) -> None:
    """Shown once: a reload shows the page without it."""
    response.delete_cookie(COOKIE, path=path, secure=secure, httponly=True, samesite="strict")
