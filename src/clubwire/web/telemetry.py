"""Per request: an ``X-Request-Id``, one JSON log line and one count (ASGI middleware).

This is on the API's hot path: a few dictionary reads, one ``orjson.dumps`` and one write.
The line holds the path without its query string, and the public prefix of the API key
(which the public API puts in the scope); never a header value.
"""

from __future__ import annotations

import random
import re
from contextlib import AbstractContextManager
from time import perf_counter

from pydantic import SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clubwire import logs, tracing
from clubwire.services.metrics import Metrics
from clubwire.web import bearer
from clubwire.web.ui import urls

KEY_PREFIX = "clubwire.key_prefix"  # scope entry: the public prefix of the presented API key
REQUEST_ID = b"x-request-id"
_SECRET_SHAPED = re.compile(r"(cw_live_|whsec_)[^/]*")  # a key pasted into a path


def family(path: str) -> str:
    """The route family, a label with four values: api, internal, ui, other."""
    if path.startswith(("/clubs/", "/api/")):
        return "api"
    if path.startswith("/internal/"):
        return "internal"
    if urls.is_ui_path(path):
        return "ui"
    return "other"


def redacted(text: str) -> str:
    """``text`` with anything shaped like a key or a signing secret cut short."""
    return _SECRET_SHAPED.sub(r"\1…", text)


class RequestTelemetry:
    """``platform_token``: a request to the internal API that holds it continues the trace
    its ``traceparent`` names (with tracing on)."""

    def __init__(self, app: ASGIApp, metrics: Metrics, platform_token: SecretStr | None) -> None:
        self.app = app
        self._counts = metrics.requests
        self._platform_token = platform_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = perf_counter()
        request_id = f"{random.getrandbits(64):016x}"
        status = 500
        path: str = scope["path"]
        kind = family(path)

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = message.get("headers", ())
                message["headers"] = [*headers, (REQUEST_ID, request_id.encode())]
            await send(message)

        with self._span(scope, kind) as span:
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                self._counts[kind, status] += 1
                span.ended(status, scope.get("route"))
                if logs.enabled():
                    seconds = perf_counter() - started
                    logs.event("request", _line(scope, request_id, status, seconds))

    def _span(self, scope: Scope, kind: str) -> AbstractContextManager[tracing.Served]:
        """The request's span: the platform's requests (to the internal API, with its
        token) continue its trace; any other begins one; health, metrics and docs are not
        traced."""
        if kind == "other" or not tracing.on():
            return tracing.NOT_TRACED
        path = redacted(scope["path"]) if _pasted(scope["path"]) else scope["path"]
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        continued = kind == "internal" and bearer.holds(
            _authorization(headers), self._platform_token
        )
        return tracing.serving(scope["method"], path, headers, continued)


def _authorization(headers: list[tuple[bytes, bytes]]) -> str | None:
    found = (value for name, value in headers if name == b"authorization")
    value = next(found, None)
    return None if value is None else value.decode("latin-1")


def _pasted(path: str) -> bool:
    """Whether ``path`` holds something shaped like a key or a signing secret."""
    return "cw_live_" in path or "whsec_" in path


def _line(scope: Scope, request_id: str, status: int, seconds: float) -> dict[str, object]:
    path: str = scope["path"]
    club: str | None = scope.get("path_params", _NONE).get("slug")
    if _pasted(path):  # a key pasted into the path
        path, club = redacted(path), club and redacted(club)
    return {
        "request_id": request_id,
        "method": scope["method"],
        "path": path,
        "status": status,
        "duration_ms": int(seconds * 100_000) / 100,
        "club": club,
        "key_prefix": scope.get(KEY_PREFIX),
    }


_NONE: dict[str, str] = {}
