"""Errors as RFC 9457 problem+json responses: the one place that knows status codes."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException
from starlette.responses import Response

from clubwire import errors

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"
REALM = 'Bearer realm="clubwire"'

_STATUS: dict[type[errors.ClubwireError], int] = {
    errors.InvalidInput: 422,
    errors.NotFound: 404,
    errors.IdempotencyKeyReused: 409,
    errors.Unauthenticated: 401,
    errors.InsufficientScope: 403,
    errors.Forbidden: 403,
    errors.NotMigrated: 503,
    errors.DatabaseUnreachable: 503,
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


def status_of(error: errors.ClubwireError) -> int:
    for cls in type(error).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]
    return 500


def _challenge(error: errors.ClubwireError) -> dict[str, str] | None:
    if isinstance(error, errors.MissingCredentials):
        return {"WWW-Authenticate": REALM}
    if isinstance(error, errors.Unauthenticated):
        return {"WWW-Authenticate": f'{REALM}, error="invalid_token"'}
    if isinstance(error, errors.InsufficientScope):
        return {"WWW-Authenticate": f'{REALM}, error="insufficient_scope", scope="{error.scope}"'}
    return None


async def _clubwire_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.ClubwireError)
    return response(status_of(exc), exc.code, exc.detail, _challenge(exc))


async def _validation_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {"location": ".".join(str(part) for part in error["loc"]), "message": error["msg"]}
        for error in exc.errors()
    ]
    detail = "; ".join(f"{p['location']}: {p['message']}" for p in problems)
    return response(422, "invalid_input", detail, errors=problems)


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_")
    return response(exc.status_code, code, str(exc.detail), exc.headers)


async def _unexpected(_request: Request, exc: Exception) -> Response:
    log.error("unhandled error", exc_info=exc)
    return response(500, "internal_error", "Something went wrong on our side; it has been logged.")


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` with problem+json."""
    app.add_exception_handler(errors.ClubwireError, _clubwire_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


def documented(*statuses: int) -> dict[int | str, dict[str, object]]:
    """OpenAPI ``responses`` entries for the problem statuses a route can answer."""
    return {
        status: {
            "description": HTTPStatus(status).phrase,
            "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }
