"""The schemas of events, for receivers and for the OpenAPI documents.

``json_schemas()`` gives one self-contained JSON Schema per kind (its ``$defs`` inline, for
receivers that validate one kind); ``openapi_webhooks()`` gives the OpenAPI 3.1 ``webhooks``
section plus the component schemas it references (``#/components/schemas/...``), to be merged
into ``components.schemas``. Both describe the bytes a receiver gets (serialization mode), and
``example()`` is a fixed envelope of each kind, as a receiver parses it.
"""

from __future__ import annotations

import functools
import random
import re
from datetime import datetime
from typing import Any, Literal, cast

import orjson
from pydantic import BaseModel, Field, create_model
from pydantic.json_schema import models_json_schema

from clubwire.domain import event_catalog, ordering, payloads

SCHEMA_REF_TEMPLATE = "#/components/schemas/{model}"
_EXAMPLE_MOMENT = datetime.fromisoformat("2026-01-13T18:30:00+00:00")
_EXAMPLE_EVENT_ID = "evt_2Rk8fV1nQ7xLm3Pz9WcT"
_EXAMPLE_ORGANIZATION_ID = "org_3kT9wQ2mZx7LpR4vN8cY"
_EXAMPLE_SEQUENCE = 2


def _pascal(kind: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[._]", kind))


def _placed(kind: str) -> dict[str, Any]:
    """The envelope's ordering fields, for the kinds that have them (all but ``ping``)."""
    resource = ordering.RESOURCES.get(kind)
    if resource is None:
        return {}
    return {
        "ordering_key": (
            str,
            Field(
                max_length=ordering.KEY_LENGTH,
                pattern=r"^[a-z_]+:.+$",
                description=f"The resource the event is about: {resource.in_words}. Events of "
                "one key are numbered by `sequence`; an endpoint marked in order gets them one "
                "at a time, in that order.",
            ),
        ),
        "sequence": (
            int,
            Field(
                ge=1,
                description="The event's place among its club's events of the same "
                "`orderingKey`: 1, 2, 3, … with no gaps or repeats, in the order they were "
                "published. A receiver may ignore an event whose sequence is not above the "
                "last it applied for that key.",
            ),
        ),
    }


@functools.cache
def _envelope_model(kind: str) -> type[BaseModel]:
    """A documentation model of the whole envelope of ``kind``."""
    return create_model(
        f"{_pascal(kind)}Event",
        __base__=payloads.Payload,
        __doc__=f"The envelope of a `{kind}` event.",
        id=(
            str,
            Field(
                pattern=r"^evt_[0-9A-Za-z]+$",
                description="The event id; the same on every endpoint the event fans out to, "
                "so receivers can de-duplicate on it.",
            ),
        ),
        event=(cast(Any, Literal)[kind], Field(description="The event kind.")),
        created_at=(payloads.Timestamp, Field(description="When the event was published.")),
        organization_id=(
            str,
            Field(pattern=r"^org_[0-9A-Za-z]+$", description="The club's identifier."),
        ),
        **_placed(kind),
        data=(event_catalog.model_for(kind), Field(description="The event payload.")),
    )


def json_schemas() -> dict[str, dict[str, object]]:
    """One self-contained JSON Schema per kind, of the whole envelope (local ``$defs``)."""
    return {
        kind: _envelope_model(kind).model_json_schema(by_alias=True, mode="serialization")
        for kind in event_catalog.KINDS
    }


def example(kind: str) -> dict[str, object]:
    """The envelope of a fixed sample of ``kind``, as a receiver parses it."""
    data = event_catalog.validate(
        kind, event_catalog.sample(kind, _EXAMPLE_MOMENT, random.Random(0))
    )
    key = ordering.key_of(kind, data.model_dump(mode="json", by_alias=True))
    place = None if key is None else ordering.Place(key, _EXAMPLE_SEQUENCE)
    body = event_catalog.envelope(
        _EXAMPLE_EVENT_ID, kind, _EXAMPLE_MOMENT, _EXAMPLE_ORGANIZATION_ID, data, place
    )
    parsed: dict[str, object] = orjson.loads(body)
    return parsed


def _headers(kind: str) -> list[dict[str, object]]:
    def header(
        name: str, description: str, schema: dict[str, object], value: str
    ) -> dict[str, object]:
        return {
            "name": name,
            "in": "header",
            "required": True,
            "description": description,
            "schema": schema,
            "example": value,
        }

    return [
        header(
            "X-Service-Signature",
            "`t=<unix seconds>,v1=<hex>`: v1 is the hex HMAC-SHA256 of `<t>.<raw body>`, keyed "
            "with the endpoint's secret. Reject a delivery whose t is more than 300 s from now.",
            {"type": "string", "pattern": r"^t=[0-9]+,v1=[0-9a-f]{64}$"},
            f"t={int(_EXAMPLE_MOMENT.timestamp())},v1={'5f' * 32}",
        ),
        header("X-Service-Event", "The event kind.", {"type": "string", "const": kind}, kind),
        header(
            "X-Service-Delivery",
            "The delivery id; the same on every attempt of this delivery.",
            {"type": "string", "pattern": r"^dlv_[0-9A-Za-z]+$"},
            "dlv_7hQ2mX9kV4pL8nR3wZ5c",
        ),
        *([] if kind not in ordering.RESOURCES else [_missed_header()]),
    ]


def _missed_header() -> dict[str, object]:
    return {
        "name": ordering.MISSED_HEADER,
        "in": "header",
        "required": False,
        "description": "Sent to an endpoint marked in order only, when an earlier delivery of "
        "the same `orderingKey` died (or its member was erased) without reaching it: that "
        "delivery's `sequence`. What it carried is missed; read the resource from the API "
        "if you keep its state.",
        "schema": {"type": "string", "pattern": "^[1-9][0-9]*$"},
        "example": "1",
    }


def _webhook(kind: str, schema_ref: dict[str, Any]) -> dict[str, object]:
    entry = event_catalog.entry(kind)
    return {
        "post": {
            "summary": entry.summary,
            "description": entry.fires_when,
            "operationId": _pascal(kind)[:1].lower() + _pascal(kind)[1:],
            "parameters": _headers(kind),
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": schema_ref, "example": example(kind)}},
            },
            "responses": {
                "2XX": {"description": "Delivered. Anything else, a redirect included, is retried."}
            },
        }
    }


def openapi_webhooks() -> tuple[dict[str, object], dict[str, object]]:
    """``(webhooks, component_schemas)`` for an OpenAPI 3.1 document.

    Each webhook's request body is a ``$ref`` into ``#/components/schemas``; merge the second
    value into ``components.schemas``.
    """
    models = {kind: _envelope_model(kind) for kind in event_catalog.KINDS}
    refs, top = models_json_schema(
        [(model, "serialization") for model in models.values()],
        by_alias=True,
        ref_template=SCHEMA_REF_TEMPLATE,
    )
    webhooks: dict[str, object] = {
        kind: _webhook(kind, refs[(model, "serialization")]) for kind, model in models.items()
    }
    components: dict[str, object] = dict(top.get("$defs", {}))
    return webhooks, components
