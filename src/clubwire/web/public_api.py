"""The club data API, ``{base_url}/api/v1``: one FastAPI app served at every club's base URL."""

from __future__ import annotations

from fastapi import FastAPI, Request
from starlette.responses import Response

from clubwire.domain import programs, scopes
from clubwire.services.api_access import ApiAccess
from clubwire.settings import Settings
from clubwire.web import openapi, problems

PROGRAMS_EXAMPLE = {"data": programs.Program.model_config["json_schema_extra"]["examples"]}  # type: ignore[index]


def create(settings: Settings) -> FastAPI:
    api = FastAPI(
        title="clubwire club data API",
        version="1.0",
        description=openapi.PUBLIC_DESCRIPTION,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    problems.install(api)
    api.add_api_route(
        "/api/v1/programs",
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
                "model": programs.ProgramList,
                "content": {"application/json": {"example": PROGRAMS_EXAMPLE}},
            },
            **problems.documented(401, 403),
        },
        openapi_extra={"security": [{openapi.API_KEY_SCHEME: []}]},
    )

    async def document(request: Request) -> Response:
        body = openapi.public_document(api, settings, request.path_params.get("slug", "{slug}"))
        return Response(body, media_type="application/json")

    api.add_route("/api/v1/openapi.json", document, include_in_schema=False)
    return api


async def list_programs(request: Request) -> Response:
    access: ApiAccess = request.state.access
    caller = await access.authorize(
        request.path_params["slug"],
        request.headers.get("authorization"),
        scopes.READ_PROGRAMS,
        request.scope["query_string"],
    )
    return Response(await access.programs_body(caller), media_type="application/json")
