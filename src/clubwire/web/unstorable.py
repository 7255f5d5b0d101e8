"""Text the database cannot hold, refused in a request's path, query string and Host header.

A club's slug or a record's id in the path, a filter in the query string and, with host-based
routing, the club in the Host header all end up in a query. PostgreSQL's text cannot hold NUL
(and psycopg cannot send a lone surrogate), so a request carrying one there is answered 422
problem+json before any route sees it, the same on every path. Bodies and forms are checked by
their own models (``domain.text.StorableText``, ``ui.base.FormFields``).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import unquote_plus

from starlette.types import ASGIApp, Receive, Scope, Send

from clubwire.domain import text
from clubwire.web import problems


class Refuse:
    """ASGI middleware: 422 for a path, query string or Host the database cannot hold."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = _problem(scope) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        await problems.response(422, "invalid_input", found)(scope, receive, send)


def _problem(scope: Scope) -> str | None:
    """What in the request the database cannot hold, in a sentence; else None."""
    for part, value in _looked_up(scope):
        why = text.refusal(value)
        if why is not None:
            return f"The {part} {why}."
    return None


def _looked_up(scope: Scope) -> Iterator[tuple[str, str]]:
    """The parts of a request that reach a query, as the app reads them."""
    yield "path", scope["path"]
    query: bytes = scope["query_string"]
    if query:
        yield "query string", unquote_plus(query.decode("latin-1"))
    for name, value in scope["headers"]:
        if name == b"host":
            yield "Host header", value.decode("latin-1")
