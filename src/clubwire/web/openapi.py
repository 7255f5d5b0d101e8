"""The OpenAPI documents: the public API's (per club) and the whole service's."""

from __future__ import annotations

import copy
import functools
from typing import Annotated, Any, Literal, Union, cast

import orjson
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import ConfigDict, Field, TypeAdapter, create_model
from pydantic.alias_generators import to_camel

from clubwire.domain import event_batches, event_catalog, event_schemas
from clubwire.settings import Settings
from clubwire.web import problems

API_KEY_SCHEME = "apiKey"
PUBLISH_BODY = "EventIn"  # the component the publish route's body refers to
BATCH_ITEM = "BatchEvent"  # the component of each event of the batch publish's body
CLUB_BODY = "ClubIn"  # the component of the club's PUT body
PLATFORM_SCHEME = "platformToken"

PUBLIC_DESCRIPTION = """\
Read-only access to a club's data. Every request carries one of the club's API keys:
`Authorization: Bearer cw_live_<prefix>_<secret>`. Keys are created in the club's settings,
under Webhooks & API, with a chosen set of scopes. Errors are `application/problem+json`
with a stable `code`: `invalid_token` (401: the key is missing, malformed, unknown, revoked,
or the club's Webhooks & API module is off) and `insufficient_scope` (403).

The listing carries an `ETag`: send it back in `If-None-Match`, and while the listing is
unchanged the answer is `304 Not Modified`, without a body. Keys are server-side secrets, so
browsers' cross-origin calls are not supported: a CORS preflight is answered 403
`cors_not_supported`.
"""

# Every answer of the club data API tells where its caller stands (ADR 0009), unless the
# operator turned those limits off (CLUBWIRE_API_RATE_LIMIT=0, CLUBWIRE_API_CLUB_RATE_LIMIT=0,
# CLUBWIRE_API_AUTH_FAILURE_LIMIT=0).
RATE_LIMIT_HEADERS: dict[str, object] = {
    "RateLimit-Policy": {
        "description": "The rate limits counted (draft-ietf-httpapi-ratelimit-headers), a "
        'list: `"per-key"` and `"per-club"` (all the club\'s keys together) for a request '
        'whose key was found, `"auth-failures"` (per client address) for one that failed to '
        "authenticate; `q` requests a window of `w` seconds.",
        "schema": {"type": "string", "example": '"per-key";q=600;w=60, "per-club";q=1800;w=60'},
    },
    "RateLimit": {
        "description": "Where the caller stands under each policy, in the same order: `r` "
        "requests remain in this window, which ends in `t` seconds.",
        "schema": {"type": "string", "example": '"per-key";r=599;t=42, "per-club";r=1799;t=42'},
    },
}
LISTING_HEADERS: dict[str, object] = {
    "ETag": {
        "description": "The listing's strong entity tag: it changes exactly when the listing "
        "does. Send it back in `If-None-Match`.",
        "required": True,
        "schema": {"type": "string", "example": '"3f2a9c0e5b7d41e8a6c2f0b9d8e7a615"'},
    },
    "Cache-Control": {
        "description": "`private, no-cache`: keep the answer, and check it with "
        "`If-None-Match` before using it again.",
        "required": True,
        "schema": {"type": "string", "example": "private, no-cache"},
    },
    **RATE_LIMIT_HEADERS,
}
IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "The `ETag` of the listing you hold (or a list of tags, or `*`): while it "
    "is current the answer is `304 Not Modified`, without a body. Compared weakly "
    "(RFC 9110 §13.1.2); a value that is not a list of entity tags is ignored.",
    "schema": {"type": "string", "example": '"3f2a9c0e5b7d41e8a6c2f0b9d8e7a615"'},
}

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
    schemas = document["components"]["schemas"]
    schemas.update(_publish_schemas(schemas))
    _limit_payload_days(schemas[CLUB_BODY], settings)
    public = copy.deepcopy(_public_base(public_api))
    prefix = "" if settings.club_host_suffix else "/clubs/{slug}"
    for path, operations in public["paths"].items():
        for operation in operations.values():
            operation.setdefault("parameters", []).insert(0, _club_parameter(settings))
        document["paths"][prefix + path] = operations
    document["components"]["schemas"].update(public["components"]["schemas"])
    app.openapi_schema = document
    return document


def _limit_payload_days(club: dict[str, Any], settings: Settings) -> None:
    """A club's payload days go up to this service's history (CLUBWIRE_RETENTION_DAYS), a
    setting: the model cannot say so, the document can."""
    days, _ = club["properties"]["payloadDays"]["anyOf"]
    days["maximum"] = settings.retention_days


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


def _publish_schemas(existing: dict[str, Any]) -> dict[str, Any]:
    """The publish bodies as the routes take them, replacing the loose ``EventIn`` and
    ``BatchEvent`` models (whose ``data`` is any object so that the service can word what is
    wrong with it): one alternative per kind that can be published, ``event`` naming it and
    ``data`` that kind's payload (and, in a batch, the event's ``idempotencyKey``). Payloads
    are in validation mode (a field with a default may be left out); one that differs from
    the webhook schema of the same name is named ``<name>Input``."""
    defs: dict[str, Any] = {}
    bodies = {}
    for name, keyed in ((PUBLISH_BODY, False), (BATCH_ITEM, True)):
        body = _publish_body(keyed).json_schema(
            mode="validation", by_alias=True, ref_template=event_schemas.SCHEMA_REF_TEMPLATE
        )
        body["description"] = "An event: `event` names its kind, `data` is that kind's payload."
        defs.update(body.pop("$defs"))
        bodies[name] = body
    renamed = {name: f"{name}Input" for name, own in defs.items() if existing.get(name, own) != own}
    refs = {_ref(old): _ref(new) for old, new in renamed.items()}
    schemas = {renamed.get(name, name): schema for name, schema in defs.items()}
    publishing: dict[str, Any] = _with_refs({**schemas, **bodies}, refs)
    return publishing


@functools.cache
def _publish_body(keyed: bool) -> TypeAdapter[Any]:
    """The publish body, one alternative per kind; ``keyed``: an event of a batch, which
    carries its idempotency key."""
    key = event_batches.BatchEvent.model_fields["idempotency_key"]
    extra: dict[str, Any] = {"idempotency_key": (key.annotation, key)} if keyed else {}
    alternatives = tuple(
        create_model(
            ("Batch" if keyed else "Publish")
            + event_catalog.model_for(kind).__name__.removesuffix("Data"),
            __config__=ConfigDict(extra="forbid", alias_generator=to_camel),
            event=(cast(Any, Literal)[kind], Field(description="The event kind.")),
            data=(event_catalog.model_for(kind), Field(description="The event payload.")),
            **extra,
        )
        for kind in event_catalog.SUBSCRIBABLE
    )
    union: Any = Annotated[cast(Any, Union)[alternatives], Field(discriminator="event")]
    return TypeAdapter(union)


def _ref(name: str) -> str:
    return event_schemas.SCHEMA_REF_TEMPLATE.format(model=name)


def _with_refs(node: Any, refs: dict[str, str]) -> Any:
    """``node`` with each ``$ref`` found in ``refs`` pointed at its new target."""
    if isinstance(node, dict):
        return {
            key: refs.get(value, value) if key == "$ref" else _with_refs(value, refs)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_with_refs(item, refs) for item in node]
    return node
