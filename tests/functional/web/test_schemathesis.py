"""Schemathesis against both OpenAPI documents, on the app ``create_app`` builds.

The service's document (``/openapi.json``: the internal API behind the platform token, and
the club data API) and a club's (``{base_url}/api/v1/openapi.json``, behind one of its API
keys) must pass Schemathesis' default checks: no 500, only documented statuses, content types
and headers, responses that fit their schemas, schema-invalid requests refused and
schema-valid ones accepted, and a full ``Allow`` on every 405.

Schemathesis' pytest integration wants its schema when the module is imported, while each
test brings its own app on a fresh database (its lazy ``from_fixture`` loader writes
``request.node._nodeid``, which pytest 9.2 no longer has). So the schemas are loaded from the
documents here, and their requests go to ``UNDER_TEST``, which hands each one to the current
test's app. The number of examples is bounded and the seed fixed: the same cases every run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi import checks
from sqlalchemy.orm import Session, sessionmaker
from starlette.types import ASGIApp, Receive, Scope, Send

from clubwire import errors
from clubwire import settings as clubwire_settings
from clubwire.domain import replay_window
from clubwire.web import openapi, public_api
from clubwire.web.app import create_app
from tests import conftest, factories

SEED = 20260105
MAX_EXAMPLES = 60
SLUG = "granite"
PLATFORM = {"Authorization": f"Bearer {conftest.PLATFORM_TOKEN}"}
# Every test shares its app (and database) between the examples, as a server would. Program
# dates are RFC 3339 date-times whose pattern keeps to the years 1901–2998: Hypothesis makes
# date-times of any year and filters, more than it likes, but within the bounded examples.
SHARED_APP = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much]
)


class AppUnderTest:
    """The app under test, for the test that runs now, and the API key of its club."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None
        self.api_key = ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None, "a Schemathesis test runs without the `tested` fixture"
        await self.app(scope, receive, send)


UNDER_TEST = AppUnderTest()


def _schema(document: dict[str, Any], base_url: str) -> schemathesis.BaseSchema:
    config = schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "base-url": base_url,
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True},
        }
    )
    schema = schemathesis.openapi.from_dict(document, config=config)
    schema.app = UNDER_TEST  # what schemathesis.openapi.from_asgi does: requests go in-process
    return schema


def _documents() -> tuple[dict[str, Any], dict[str, Any]]:
    """The service's document and a club's, as the app serves them (no database needed)."""
    settings = conftest.make_settings("sqlite:///unused.db", Path("."))
    club = openapi.public_document(public_api.describe(), settings, SLUG)
    return create_app(settings).openapi(), orjson.loads(club)


SERVICE_DOCUMENT, CLUB_DOCUMENT = _documents()
service = _schema(SERVICE_DOCUMENT, "http://testserver")
club = _schema(CLUB_DOCUMENT, f"http://testserver/clubs/{SLUG}")


@pytest.fixture
def tested(
    settings: clubwire_settings.Settings, sessions: sessionmaker[Session]
) -> Iterator[AppUnderTest]:
    """The app on this test's database, with a club that has programs and an API key."""
    with sessions.begin() as session:
        granite = factories.make_club(session, SLUG)
        factories.make_program(session, granite, "prg_league")
        factories.make_program(session, granite, "prg_clinic", type="CLINIC", price="45.50")
        _, UNDER_TEST.api_key = factories.make_key(session, granite)
    # Schemathesis sends hundreds of bad keys a minute from one address by design: with the
    # failed-authentication limit on, its check that a bad key gets 401 would meet 429s.
    # The limit has its own tests (services/club_api/test_rate_limits.py); the per-key limit
    # stays on.
    unthrottled = conftest.make_settings(
        settings.database_url, settings.home, api_auth_failure_limit=0
    )
    UNDER_TEST.app = create_app(unthrottled, factories.FakeClock())
    yield UNDER_TEST
    UNDER_TEST.app, UNDER_TEST.api_key = None, ""


@service.hook
def filter_body(_context: schemathesis.HookContext, body: object) -> bool:
    return _keeps_two_field_rules(body)


def _keeps_two_field_rules(body: object) -> bool:
    """Whether ``body`` keeps to the rules that span two fields, which JSON Schema cannot say
    (the documents' descriptions do): a program ends no earlier than it starts, a reservation
    ends after it starts, a replay's window ends after it starts; in a batch, each of its
    events. Bodies that are not even shaped so are kept, for the route to refuse."""
    if not isinstance(body, dict):
        return True
    data = body.get("data")
    reservation = data.get("reservation") if isinstance(data, dict) else None
    batch = body.get("events")
    return (
        (not isinstance(batch, list) or all(_keeps_two_field_rules(event) for event in batch))
        and _ordered(body, "startDate", "endDate", datetime.fromisoformat, equal=True)
        and _replay_window(body)
        and (
            not isinstance(reservation, dict)
            or _ordered(reservation, "startTime", "endTime", str, equal=False)
        )
    )


def _replay_window(body: dict[str, Any]) -> bool:
    """A replay's window ends after it starts, on days that exist (a pattern lets 02-30
    through). Bounds missing or not text are kept, for the route to refuse."""
    try:
        return bool(
            replay_window.minute(body["since"], "since") < replay_window.minute(body["until"], "")
        )
    except (KeyError, TypeError, AttributeError):
        return True
    except errors.InvalidInput:
        return False


def _ordered(
    fields: dict[str, Any], first: str, then: str, read: Callable[[Any], Any], equal: bool
) -> bool:
    try:
        start, end = read(fields[first]), read(fields[then])
        return bool(start < end or (equal and start == end))
    except (KeyError, TypeError, ValueError):
        return True


def test_the_documents_tested_are_the_ones_served(tested: AppUnderTest) -> None:
    assert tested.app is not None
    with TestClient(tested.app) as client:
        assert client.get("/openapi.json").json() == SERVICE_DOCUMENT
        assert client.get(f"/clubs/{SLUG}/api/v1/openapi.json").json() == CLUB_DOCUMENT


@service.parametrize()
@SHARED_APP
def test_the_service_does_what_its_document_says(
    case: schemathesis.Case[Any], tested: AppUnderTest
) -> None:
    case.call_and_validate(headers=PLATFORM, excluded_checks=_at_the_club(case))


def _at_the_club(case: schemathesis.Case[Any]) -> list[schemathesis.CheckFunction]:
    """A schema-valid request goes to the test's club, so that its body is read and judged
    (a made-up slug would be answered 404 first, which the acceptance check allows). Its
    check that schema-valid requests are accepted is left out for a body that breaks a
    two-field rule: the hook keeps those out of generated bodies, not out of the coverage
    phase's."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return []
    if "slug" in (case.path_parameters or {}):
        case.path_parameters["slug"] = SLUG
    return [] if _keeps_two_field_rules(case.body) else [checks.positive_data_acceptance]


@club.parametrize()
@SHARED_APP
def test_a_club_api_does_what_its_document_says(
    case: schemathesis.Case[Any], tested: AppUnderTest
) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {tested.api_key}"})
