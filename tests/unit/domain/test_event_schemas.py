"""Unit tests for the event schemas: the OpenAPI webhooks, their components and JSON Schemas."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from clubwire.domain import event_catalog, event_schemas

REF = re.compile(r'"\$ref":"([^"]*)"')


def refs(node: object) -> list[str]:
    """Every ``$ref`` below ``node``."""
    found: list[str] = REF.findall(orjson.dumps(node).decode())
    return found


def test_openapi_webhooks_has_one_entry_per_kind_with_resolvable_refs() -> None:
    webhooks, schemas = event_schemas.openapi_webhooks()
    assert list(webhooks) == list(event_catalog.KINDS)
    prefix = "#/components/schemas/"
    for ref in [*refs(webhooks), *refs(schemas)]:
        assert ref.startswith(prefix)
        assert ref.removeprefix(prefix) in schemas
    operation_ids = set()
    for kind, entry in webhooks.items():
        assert isinstance(entry, dict)
        post = entry["post"]
        operation_ids.add(post["operationId"])
        assert post["summary"]
        assert post["description"]
        ours = ["X-Service-Signature", "X-Service-Event", "X-Service-Delivery"]
        missed = [] if kind == event_catalog.PING else ["X-Service-Missed-Sequence"]
        assert [p["name"] for p in post["parameters"]] == ours + missed
        assert all(p["in"] == "header" for p in post["parameters"])
        assert [p["name"] for p in post["parameters"] if p["required"]] == ours
        assert post["responses"] == {
            "2XX": {"description": post["responses"]["2XX"]["description"]}
        }
        body = post["requestBody"]
        assert body["required"] is True
        content = body["content"]["application/json"]
        envelope_schema: Any = schemas[content["schema"]["$ref"].removeprefix(prefix)]
        assert envelope_schema["properties"]["event"]["const"] == kind
        placed = [] if kind == event_catalog.PING else ["orderingKey", "sequence"]
        assert list(envelope_schema["properties"]) == [
            "id",
            "event",
            "createdAt",
            "organizationId",
            *placed,
            "data",
        ]
        example = content["example"]
        assert example["event"] == kind
        event_catalog.validate(kind, example["data"])
    assert len(operation_ids) == len(event_catalog.KINDS)


def test_component_schemas_forbid_unknown_fields_and_describe_every_field() -> None:
    _, schemas = event_schemas.openapi_webhooks()
    objects = {
        name: s for name, s in schemas.items() if isinstance(s, dict) and s.get("type") == "object"
    }
    assert len(objects) >= 20
    for name, schema in objects.items():
        assert schema["additionalProperties"] is False, name
        assert schema["description"], name
        assert all(field.get("description") for field in schema["properties"].values()), name
        assert schema["required"] == list(schema["properties"]), name


def test_amounts_and_timestamps_are_documented_as_written() -> None:
    _, schemas = event_schemas.openapi_webhooks()
    payment: Any = schemas["PaymentInfo"]
    assert payment["properties"]["amount"]["type"] == "number"
    assert payment["properties"]["completedAt"]["format"] == "date-time"


@pytest.mark.parametrize("kind", event_catalog.KINDS)
def test_json_schemas_are_self_contained(kind: str) -> None:
    schema = event_schemas.json_schemas()[kind]
    defs: Any = schema["$defs"]
    for ref in refs(schema):
        assert ref.removeprefix("#/$defs/") in defs
    assert set(event_schemas.json_schemas()) == set(event_catalog.KINDS)
