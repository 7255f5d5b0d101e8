"""Request bodies have a size limit (``CLUBWIRE_MAX_REQUEST_BYTES``).

A body declared or found larger is refused with 413 problem+json before the app sees any of
it, so no one, signed in or not, can make a process hold an arbitrarily large body. Methods
without a body (the club data API's GET among them) pass straight through.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clubwire.web import problems

_BODILESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _BODILESS:
            await self.app(scope, receive, send)
            return
        body = await self._read(scope, receive)
        if body is None:
            detail = f"A request body may have at most {self.max_bytes} bytes."
            await problems.response(413, "too_large", detail)(scope, receive, send)
            return
        await self.app(scope, _replaying(body, receive), send)

    async def _read(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it is known to be too large."""
        if _declared_length(scope) > self.max_bytes:
            return None
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away: the app sees an empty body and the disconnect
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return None
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)


def _declared_length(scope: Scope) -> int:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


def _replaying(body: bytes, receive: Receive) -> Receive:
    """The body as one message, then whatever the connection says next (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
