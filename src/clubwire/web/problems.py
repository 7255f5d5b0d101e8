"""Errors as RFC 9457 problem+json responses: the one place that knows status codes."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus

import orjson
import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import BaseRoute, Host, Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clubwire import errors
from clubwire.storage import database

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"
REALM = 'Bearer realm="clubwire"'
# Seconds a client should wait after a 503 database_unavailable: about what a PostgreSQL
# restart or fail-over, or SQLite's busy timeout, takes; sooner would only add load to a
# recovering server, later would keep clients away after it is back.
RETRY_AFTER = 5


class CrossOriginRefused(errors.ClubwireError):
    """Browsers cannot call this API: an API key is a server-side secret, which a web page
    would hand to every visitor. Call the API from your site's server, and give the page what
    it needs from there."""

    # A refusal of HTTP's own (a CORS preflight), so it is defined here, at the edge.
    code = "cors_not_supported"


_STATUS: dict[type[errors.ClubwireError], int] = {
    errors.InvalidInput: 422,
    errors.NotFound: 404,
    errors.IdempotencyKeyReused: 409,
    errors.Conflict: 409,
    errors.Unauthenticated: 401,
    errors.InsufficientScope: 403,
    errors.Forbidden: 403,
    CrossOriginRefused: 403,
    errors.NotMigrated: 503,
    errors.DatabaseUnavailable: 503,
    errors.TooManyAttempts: 429,
    errors.TooManyRequests: 429,
    # This process cannot serve as configured (after a secret-key rotation, say): not a bug,
    # but nothing a client can fix; logged for the operators.
    errors.ConfigurationError: 503,
}


class Problem(BaseModel):
    """An RFC 9457 problem; ``code`` is stable and meant for programs to branch on."""

    type: str = Field(examples=["urn:clubwire:problem:invalid_token"])
    title: str = Field(examples=["Unauthorized"])
    status: int = Field(examples=[401])
    detail: str = Field(examples=["This API key has been revoked."])
    code: str = Field(examples=["invalid_token"])


def response(
    status: int,
    code: str,
    detail: str,
    headers: Mapping[str, str] | None = None,
    **extra: object,
) -> Response:
    body = {
        "type": f"urn:clubwire:problem:{code}",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
    }
    return Response(orjson.dumps(body), status, headers, media_type=MEDIA_TYPE)


def problem_at(error: errors.ClubwireError, location: str) -> Response:
    """A problem with one part of the request, ``location`` (such as ``body.events.3``), named
    as a refused body's parts are: first in the detail, and listed in ``errors``."""
    return response(
        status_of(error),
        error.code,
        f"{location}: {error.detail}",
        headers_of(error),
        errors=[{"location": location, "message": error.detail}],
    )


def status_of(error: errors.ClubwireError) -> int:
    for cls in type(error).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]
    return 500


def headers_of(error: errors.ClubwireError) -> dict[str, str] | None:
    """The headers an answer to ``error`` carries: an authentication challenge, or when to
    try again."""
    if isinstance(error, errors.DatabaseUnavailable):
        return {"Retry-After": str(RETRY_AFTER)}
    if isinstance(error, errors.MissingCredentials):
        return {"WWW-Authenticate": REALM}
    if isinstance(error, errors.Unauthenticated):
        return {"WWW-Authenticate": f'{REALM}, error="invalid_token"'}
    if isinstance(error, errors.InsufficientScope):
        return {"WWW-Authenticate": f'{REALM}, error="insufficient_scope", scope="{error.scope}"'}
    return None


def recognised(exc: Exception) -> errors.ClubwireError | None:
    """``exc`` as a clubwire error: itself, or ``DatabaseUnavailable`` when it says the database
    cannot be used right now (logged here as one warning line naming its class, without a
    traceback: an outage is not a bug); None for anything else, a fault."""
    if isinstance(exc, errors.ConfigurationError):
        log.error("cannot serve as configured: %s", exc.detail)  # for the operators
    if isinstance(exc, errors.ClubwireError):
        return exc
    if not database.unavailable(exc):
        return None
    cause = exc.orig if isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.orig else exc
    log.warning("the database is unavailable (%s): answered 503", _class_name(cause))
    return errors.DatabaseUnavailable()


def answer(exc: Exception) -> Response:
    """The answer to an exception no handler took: 503 when the database is unavailable,
    else 500 (logged once, with its traceback)."""
    error = recognised(exc)
    if error is not None:
        return problem(error)
    log.error("unhandled error", exc_info=exc)
    return response(500, "internal_error", "Something went wrong on our side; it has been logged.")


def problem(error: errors.ClubwireError) -> Response:
    return response(status_of(error), error.code, error.detail, headers_of(error))


def _class_name(error: BaseException) -> str:
    return f"{type(error).__module__}.{type(error).__qualname__}"


async def _clubwire_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.ClubwireError)
    return problem(recognised(exc) or exc)


async def _validation_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {"location": ".".join(str(part) for part in error["loc"]), "message": error["msg"]}
        for error in exc.errors()
    ]
    detail = "; ".join(f"{p['location']}: {p['message']}" for p in problems)
    return response(422, "invalid_input", detail, errors=problems)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_")
    headers = exc.headers
    allowed = _allowed(request.app.router.routes, request.scope) if exc.status_code == 405 else []
    if allowed:
        headers = {**(headers or {}), "Allow": ", ".join(allowed)}
    return response(exc.status_code, code, str(exc.detail), headers)


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _allowed(routes: Sequence[BaseRoute], scope: Scope) -> list[str]:
    """Every method some route answers at the scope's path, in alphabetical order. Starlette's
    405 names only those of the first route that matched the path (in FastAPI there is one
    route per method), in no stable order."""
    return [method for method in _METHODS if _answers(routes, {**scope, "method": method})]


def _answers(routes: Sequence[BaseRoute], scope: Scope) -> bool:
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.FULL and (
            not isinstance(route, Host | Mount) or _answers(route.routes, {**scope, **child})
        ):
            return True
    return False


class Faults:
    """ASGI middleware, innermost: an exception no handler took is answered here (``answer``).

    Starlette's own last resort (a handler for ``Exception``) answers too, but then raises the
    exception again for the server to log: every fault was logged twice, with two tracebacks.
    An exception after the answer has begun cannot be answered; the server logs that one.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if started:
                raise
            await answer(exc)(scope, receive, send)


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` with problem+json. Call it before any middleware is added,
    so that ``Faults`` is the innermost one (the others then see its answer)."""
    app.add_exception_handler(errors.ClubwireError, _clubwire_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_middleware(Faults)


def documented(*statuses: int) -> dict[int | str, dict[str, object]]:
    """OpenAPI ``responses`` entries for the problem statuses a route can answer."""
    return {status: _documented(status) for status in statuses}


def _documented(status: int) -> dict[str, object]:
    entry: dict[str, object] = {
        "description": HTTPStatus(status).phrase,
        "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    if status == 503:
        entry["description"] = "The database is unavailable for the moment (database_unavailable)"
        entry["headers"] = {"Retry-After": _RETRY_AFTER_HEADER}
    if status == 429:
        entry["description"] = "Over a rate limit (rate_limited): wait for `Retry-After`"
        entry["headers"] = {"Retry-After": _RETRY_AFTER_HEADER}
    return entry


_RETRY_AFTER_HEADER = {
    "description": "Seconds to wait before trying again.",
    "schema": {"type": "integer", "example": RETRY_AFTER},
}
