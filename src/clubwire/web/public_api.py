"""The club data API, ``{base_url}/api/v1``, served at every club's base URL.

Requests are served by plain Starlette routes placed first in the app (ADR 0001: a FastAPI
sub-application per request halved the throughput). ``describe`` builds the FastAPI
application whose only use is to generate the public OpenAPI document from the same handler.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from clubwire import errors
from clubwire.domain import key_format, program_wire, scopes
from clubwire.services.api_access import ApiAccess
from clubwire.settings import Settings
from clubwire.web import openapi, problems, telemetry

PROGRAMS_PATH = "/api/v1/programs"
DOCUMENT_PATH = "/api/v1/openapi.json"
PROGRAMS_EXAMPLE = {"data": program_wire.Program.model_config["json_schema_extra"]["examples"]}  # type: ignore[index]


async def list_programs(request: Request) -> Response:
    access: ApiAccess = request.state.access
    authorization = request.headers.get("authorization")
    try:
        caller = await access.authorize(
            request.path_params["slug"],
            authorization,
            scopes.READ_PROGRAMS,
            request.scope["query_string"],
        )
    except errors.ClubwireError:
        request.scope[telemetry.KEY_PREFIX] = _presented_prefix(authorization)
        raise
    request.scope[telemetry.KEY_PREFIX] = caller.prefix
    return Response(await access.programs_body(caller), media_type="application/json")


def _presented_prefix(authorization: str | None) -> str | None:
    """The public prefix of a refused key, for the request's log line (if it is key-shaped)."""
    token = key_format.bearer_token(authorization)
    parsed = key_format.parse(token) if token is not None else None
    return parsed.prefix if parsed is not None else None


def routes(settings: Settings, prefix: str) -> list[BaseRoute]:
    """The public API's routes under ``prefix`` (``/clubs/{slug}``, or empty by host name)."""
    described = describe()

    async def document(request: Request) -> Response:
        body = openapi.public_document(described, settings, request.path_params["slug"])
        return Response(body, media_type="application/json")

    return [
        Route(prefix + PROGRAMS_PATH, list_programs, methods=["GET"]),
        Route(prefix + DOCUMENT_PATH, document, methods=["GET"]),
    ]


def describe() -> FastAPI:
    """The public API as FastAPI sees it, for its OpenAPI document only."""
    api = FastAPI(
        title="clubwire club data API",
        version="1.0",
        description=openapi.PUBLIC_DESCRIPTION,
        openapi_url=None,
    )
    api.add_api_route(
        PROGRAMS_PATH,
        list_programs,
        methods=["GET"],
        operation_id="listPrograms",
        summary="List the club's programs",
        description=(
            "The club's active, non-private programs: what an anonymous visitor of its "
            "storefront sees. Ordered by start date, then name, then id. "
            "Needs the scope `read:programs`."
        ),
        tags=["programs"],
        response_class=Response,
        responses={
            200: {
                "description": "The programs",
                "model": program_wire.ProgramList,
                "content": {"application/json": {"example": PROGRAMS_EXAMPLE}},
            },
            **problems.documented(401, 403, 503),
        },
        openapi_extra={"security": [{openapi.API_KEY_SCHEME: []}]},
    )
    return api
