"""The OpenAPI documents: the public one per club, and the whole service's."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from clubwire.domain import event_catalog, text
from tests import conftest, factories

AUTH = {"Authorization": f"Bearer {conftest.PLATFORM_TOKEN}"}


def test_public_document_is_served_at_the_clubs_base_url(client: TestClient) -> None:
    response = client.get("/clubs/granite/api/v1/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    assert document["servers"] == [
        {"url": "http://127.0.0.1:8000/clubs/granite", "description": "This club"}
    ]
    assert list(document["paths"]) == ["/api/v1/programs"]
    operation = document["paths"]["/api/v1/programs"]["get"]
    assert operation["security"] == [{"apiKey": []}]
    assert set(operation["responses"]) == {"200", "304", "401", "403", "429", "503"}
    assert operation["responses"]["200"]["content"]["application/json"]["example"]["data"]
    assert document["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert "platformToken" not in document["components"]["securitySchemes"]
    program = document["components"]["schemas"]["Program"]
    assert set(program["properties"]) == {
        "id",
        "name",
        "description",
        "type",
        "status",
        "startDate",
        "endDate",
        "price",
        "capacity",
        "createdAt",
        "updatedAt",
    }


def test_the_listing_documents_its_conditional_answers(client: TestClient) -> None:
    for url, path in (
        ("/clubs/granite/api/v1/openapi.json", "/api/v1/programs"),
        ("/openapi.json", "/clubs/{slug}/api/v1/programs"),
    ):
        operation = client.get(url).json()["paths"][path]["get"]
        (condition,) = [p for p in operation["parameters"] if p["name"] == "If-None-Match"]
        assert (condition["in"], condition["required"]) == ("header", False)
        not_modified = operation["responses"]["304"]
        assert "content" not in not_modified
        for status in ("200", "304"):
            headers = operation["responses"][status]["headers"]
            assert set(headers) == {"ETag", "Cache-Control", "RateLimit-Policy", "RateLimit"}
            assert headers["ETag"]["required"]
            assert headers["Cache-Control"]["required"]
            assert headers["Cache-Control"]["schema"]["example"] == "private, no-cache"
        for status in ("401", "403", "429"):  # each rate limit may be turned off
            assert {"RateLimit-Policy", "RateLimit"} <= set(
                operation["responses"][status]["headers"]
            )
        assert "Retry-After" in operation["responses"]["429"]["headers"]


def test_the_public_description_says_browsers_cannot_call_it(client: TestClient) -> None:
    description = client.get("/clubs/granite/api/v1/openapi.json").json()["info"]["description"]
    assert "cors_not_supported" in description
    assert "If-None-Match" in description


def test_each_club_gets_its_own_server(client: TestClient) -> None:
    document = client.get("/clubs/marble/api/v1/openapi.json").json()
    assert document["servers"][0]["url"] == "http://127.0.0.1:8000/clubs/marble"


def test_service_document_holds_the_internal_and_public_apis(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    assert {
        "/internal/v1/clubs/{slug}",
        "/internal/v1/clubs/{slug}/modules/webhooks",
        "/internal/v1/clubs/{slug}/programs/{program_id}",
        "/clubs/{slug}/api/v1/programs",
    } <= set(document["paths"])
    internal = document["paths"]["/internal/v1/clubs/{slug}"]["put"]
    assert internal["security"] == [{"platformToken": []}]
    assert "application/problem+json" in internal["responses"]["401"]["content"]
    public = document["paths"]["/clubs/{slug}/api/v1/programs"]["get"]
    assert public["parameters"][0]["name"] == "slug"


def test_both_documents_describe_every_webhook(client: TestClient) -> None:
    for url in ("/openapi.json", "/clubs/granite/api/v1/openapi.json"):
        document = client.get(url).json()
        assert set(document["webhooks"]) == {
            "registration.created",
            "payment.completed",
            "game.updated",
            "member.updated",
            "practice_ice.booked",
            "ping",
        }
        for hook in document["webhooks"].values():
            ref = hook["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.removeprefix("#/components/schemas/") in document["components"]["schemas"]


def test_the_publish_operation_is_documented(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/internal/v1/clubs/{slug}/events"][
        "post"
    ]
    assert {p["name"] for p in operation["parameters"]} >= {"slug", "idempotency-key"}
    assert {"200", "201", "422"} <= set(operation["responses"])


def test_internal_operations_document_the_answers_they_can_give(client: TestClient) -> None:
    """409 where a key can be reused, 413 where a body is read, 201 where a PUT creates."""
    paths = client.get("/openapi.json").json()["paths"]
    statuses = {
        (method, path): set(operation["responses"])
        for path, operations in paths.items()
        if path.startswith("/internal/v1/")
        for method, operation in operations.items()
    }
    program = "/internal/v1/clubs/{slug}/programs/{program_id}"
    assert {"409", "413"} <= statuses["post", "/internal/v1/clubs/{slug}/events"]
    assert {"201", "413"} <= statuses["put", "/internal/v1/clubs/{slug}"]
    assert {"201", "413"} <= statuses["put", program]
    assert "413" in statuses["put", "/internal/v1/clubs/{slug}/modules/webhooks"]
    assert "413" not in statuses["delete", program]  # no body is read


def test_routes_that_read_a_body_document_the_400_of_a_body_that_is_not_json(
    client: TestClient,
) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "400" in paths["/internal/v1/clubs/{slug}/events"]["post"]["responses"]
    assert "400" in paths["/internal/v1/clubs/{slug}"]["put"]["responses"]
    response = client.put(
        "/internal/v1/clubs/granite",
        content=b'{"name": "\xff"}',
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"


def test_the_publish_body_is_one_of_the_kinds_that_can_be_published(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    body = schemas["EventIn"]
    assert set(body["discriminator"]["mapping"]) == set(event_catalog.SUBSCRIBABLE)
    registration = schemas["PublishRegistrationCreated"]
    assert registration["properties"]["event"]["const"] == "registration.created"
    data = registration["properties"]["data"]["$ref"].removeprefix("#/components/schemas/")
    # As the route takes it, a field with a default may be left out; the webhook lists all.
    assert "invoice" not in schemas[data]["required"]
    assert "invoice" in schemas["RegistrationCreatedData"]["required"]


def test_the_batch_publish_takes_1_to_100_events_each_of_a_kind_with_its_key(
    client: TestClient,
) -> None:
    document = client.get("/openapi.json").json()
    operation = document["paths"]["/internal/v1/clubs/{slug}/events/batch"]["post"]
    assert {"200", "201", "400", "409", "413", "422"} <= set(operation["responses"])
    schemas = document["components"]["schemas"]
    events = schemas["EventBatch"]["properties"]["events"]
    assert (events["minItems"], events["maxItems"]) == (1, 100)
    item = schemas[events["items"]["$ref"].removeprefix("#/components/schemas/")]
    assert set(item["discriminator"]["mapping"]) == set(event_catalog.SUBSCRIBABLE)
    registration = schemas["BatchRegistrationCreated"]
    assert set(registration["properties"]) == {"event", "data", "idempotencyKey"}
    assert registration["required"] == ["event", "data"]
    assert (
        registration["properties"]["data"]
        == schemas["PublishRegistrationCreated"]["properties"]["data"]
    )
    header = next(
        p
        for p in document["paths"]["/internal/v1/clubs/{slug}/events"]["post"]["parameters"]
        if p["name"] == "idempotency-key"
    )
    (key, _) = registration["properties"]["idempotencyKey"]["anyOf"]
    assert key["pattern"] == header["schema"]["pattern"]


def test_booleans_are_strict_as_documented(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["ModuleIn"]["properties"]["enabled"]["type"] == "boolean"
    client.put("/internal/v1/clubs/granite", json={"name": "Granite"}, headers=AUTH)
    for value in (0, 1, "true", None):
        response = client.put(
            "/internal/v1/clubs/granite/modules/webhooks", json={"enabled": value}, headers=AUTH
        )
        assert response.status_code == 422, value
    program = factories.program_data(private=0)
    response = client.put("/internal/v1/clubs/granite/programs/p1", json=program, headers=AUTH)
    assert response.status_code == 422


def test_text_fields_document_that_nul_is_refused(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    pattern = schemas["ClubIn"]["properties"]["name"]["pattern"]
    assert pattern == text.NAME_PATTERN  # a name refuses NUL, other controls and line breaks
    for name in ("a\x00b", "a\nb"):
        assert re.fullmatch(pattern, name) is None
        response = client.put("/internal/v1/clubs/granite", json={"name": name}, headers=AUTH)
        assert response.status_code == 422


def test_a_405_allows_every_method_of_the_path(client: TestClient) -> None:
    """FastAPI has one route per method: Starlette's 405 named only the first one's."""
    program = "/internal/v1/clubs/granite/programs/p1"
    for method in ("POST", "OPTIONS", "PATCH"):
        response = client.request(method, program, headers=AUTH)
        assert response.status_code == 405
        assert response.headers["allow"] == "DELETE, PUT"
        assert response.headers["content-type"] == "application/problem+json"
    public = client.post("/clubs/granite/api/v1/programs")
    assert public.status_code == 405
    assert public.headers["allow"] == "GET, HEAD"


def test_payload_days_go_up_to_this_services_history(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    days = schemas["ClubIn"]["properties"]["payloadDays"]
    assert days["anyOf"] == [{"type": "integer", "minimum": 1, "maximum": 30}, {"type": "null"}]
    assert "payloadDays" not in schemas["ClubIn"].get("required", [])
    assert "payloadDays" in schemas["ClubOut"]["required"]
