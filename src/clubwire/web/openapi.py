"""The OpenAPI documents: the public API's (per club) and the whole service's."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from clubwire.domain import event_schemas
from clubwire.settings import Settings
from clubwire.web import problems

API_KEY_SCHEME = "apiKey"
PLATFORM_SCHEME = "platformToken"

PUBLIC_DESCRIPTION = """\
Read-only access to a club's data. Every request carries one of the club's API keys:
`Authorization: Bearer cw_live_<prefix>_<secret>`. Keys are created in the club's settings,
under Webhooks & API, with a chosen set of scopes. Errors are `application/problem+json`
with a stable `code`: `invalid_token` (401: the key is missing, malformed, unknown, revoked,
or the club's Webhooks & API module is off) and `insufficient_scope` (403).
"""

_SECURITY_SCHEMES = {
    API_KEY_SCHEME: {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "cw_live_<prefix>_<secret>",
        "description": "A club API key, created in the club's settings.",
    },
    PLATFORM_SCHEME: {
        "type": "http",
        "scheme": "bearer",
        "description": "The host platform's token, CLUBWIRE_PLATFORM_TOKEN.",
    },
}


def _with_components(document: dict[str, Any], *schemes: str) -> dict[str, Any]:
    """Add what every document shares: the problem schema, security schemes, and the signed
    webhooks clubwire sends (OpenAPI 3.1 ``webhooks``)."""
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Problem"] = problems.Problem.model_json_schema()
    components["securitySchemes"] = {name: _SECURITY_SCHEMES[name] for name in schemes}
    webhooks, webhook_schemas = event_schemas.openapi_webhooks()
    document["webhooks"] = webhooks
    schemas.update(webhook_schemas)
    return document


def _generate(app: FastAPI) -> dict[str, Any]:
    return get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )


def _public_base(api: FastAPI) -> dict[str, Any]:
    if api.openapi_schema is None:
        api.openapi_schema = _with_components(_generate(api), API_KEY_SCHEME)
    return api.openapi_schema


def public_document(api: FastAPI, settings: Settings, slug: str) -> bytes:
    """The public API's document, with the club's own base URL as its server."""
    document = dict(_public_base(api))
    document["servers"] = [{"url": settings.club_base_url(slug), "description": "This club"}]
    return orjson.dumps(document)


def service_document(app: FastAPI, public_api: FastAPI, settings: Settings) -> dict[str, Any]:
    """The whole service: the internal API, and the public API at every club's base URL."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = _with_components(_generate(app), API_KEY_SCHEME, PLATFORM_SCHEME)
    public = copy.deepcopy(_public_base(public_api))
    prefix = "" if settings.club_host_suffix else "/clubs/{slug}"
    for path, operations in public["paths"].items():
        for operation in operations.values():
            operation.setdefault("parameters", []).insert(0, _club_parameter(settings))
        document["paths"][prefix + path] = operations
    document["components"]["schemas"].update(public["components"]["schemas"])
    app.openapi_schema = document
    return document


def _club_parameter(settings: Settings) -> dict[str, Any]:
    example = "granite-curling-club"
    if settings.club_host_suffix:
        return {
            "name": "Host",
            "in": "header",
            "required": True,
            "description": f"The club's host name: {{slug}}{settings.club_host_suffix}.",
            "schema": {"type": "string", "example": example + settings.club_host_suffix},
        }
    return {
        "name": "slug",
        "in": "path",
        "required": True,
        "description": "The club's slug.",
        "schema": {"type": "string", "example": example},
    }
