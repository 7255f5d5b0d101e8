"""Replay from the command line and the internal API (issue 14, item 1): the count, the
preview, the limit, a repeat that replays nothing, refusals in one line or problem+json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from clubwire.domain import off_reasons
from clubwire.domain.delivering import Status
from clubwire.services import clubs, endpoints
from clubwire.settings import Settings
from clubwire.storage.models import Delivery
from tests.conftest import PLATFORM_TOKEN
from tests.factories import EPOCH, make_club, make_delivery, make_endpoint
from tests.functional.cli_runner import Invoke, ok, one_line_error

AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}
SINCE, UNTIL = "2026-01-05T12:00Z", "2026-01-05T13:00Z"


@dataclass(frozen=True)
class World:
    club_id: str
    endpoint_id: str

    @property
    def url(self) -> str:
        return f"/internal/v1/clubs/granite/endpoints/{self.endpoint_id}/replays"

    def args(self, *more: str) -> list[str]:
        window = ["--since", SINCE, "--until", UNTIL]
        return ["delivery", "replay", "granite", "--endpoint", self.endpoint_id, *window, *more]


@pytest.fixture
def world(session: Session, settings: Settings) -> World:
    """Five dead deliveries (12:01 to 12:05), one succeeded (12:06), one dead outside."""
    club = make_club(session)
    endpoint, _ = make_endpoint(session, club, settings)
    for minute in range(1, 6):
        make_delivery(session, club, endpoint, EPOCH.replace(minute=minute))
    make_delivery(session, club, endpoint, EPOCH.replace(minute=6), Status.SUCCEEDED)
    make_delivery(session, club, endpoint, EPOCH + timedelta(hours=1))
    session.commit()
    return World(club.id, endpoint.id)


def _due(session: Session) -> int:
    session.expire_all()
    query = select(func.count()).where(Delivery.next_attempt_at.is_not(None))
    return session.scalar(query) or 0


def test_the_cli_previews_replays_and_replays_nothing_twice(
    run: Invoke, world: World, session: Session
) -> None:
    assert ok(run(*world.args("--dry-run"))).out == "5 deliveries will be replayed.\n"
    assert _due(session) == 0
    assert ok(run(*world.args())).out == "Replayed 5 deliveries.\n"
    assert _due(session) == 5
    again = json.loads(ok(run(*world.args("--json"))).out)
    assert again == {"count": 0, "matching": 0, "capped": False, "withheld": 0, "dryRun": False}
    succeeded = ok(run(*world.args("--status", "succeeded", "--event", "registration.created")))
    assert succeeded.out == "Replayed 1 delivery.\n"


def test_the_cli_says_plainly_when_the_window_holds_more_than_the_limit(
    run: Invoke, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUBWIRE_REPLAY_LIMIT", "2")
    preview = ok(run(*world.args("--dry-run"))).out
    assert (
        preview == "2 of 5 deliveries will be replayed; narrow the window or replay again after.\n"
    )
    assert json.loads(ok(run(*world.args("--json"))).out)["capped"] is True
    assert ok(run(*world.args())).out.startswith("Replayed 2 of 3 deliveries; replay again")
    assert ok(run(*world.args())).out == "Replayed 1 delivery.\n"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--since", "yesterday"],
            "since must be a time to the minute, like 2026-01-05T12:00Z",
        ),
        (["--until", "2026-01-05T12:00:30Z"], "until must be a time to the minute"),
        (["--until", "2026-01-05T11:00Z"], "since must be before until"),
        (["--status", "pending"], '"pending" is not a status a replay can choose'),
        (["--event", "ping"], '"ping" is not an event kind that can be replayed'),
        (["--since", "2026-01-05T12:00\x00Z"], "NUL"),
        (["--since", "2026-01-05T12:00Z" * 10], "since must be a time to the minute"),
    ],
)
def test_the_cli_refuses_bad_input_in_one_line(
    run: Invoke, world: World, args: list[str], needle: str
) -> None:
    assert needle in one_line_error(run(*world.args(*args)))


def test_the_cli_refuses_while_the_endpoint_or_module_is_off(
    run: Invoke, world: World, session: Session
) -> None:
    endpoints.disable_endpoint(
        session, world.club_id, world.endpoint_id, EPOCH, off_reasons.OffReason.STAFF
    )
    session.commit()
    assert "switch it on to replay" in one_line_error(run(*world.args()))
    clubs.set_webhooks_module(session, "granite", False, EPOCH)
    session.commit()
    assert "Webhooks & API are off" in one_line_error(run(*world.args("--dry-run")))
    assert "no webhook endpoint" in one_line_error(
        run(*world.args()[:4], "we_nope", *world.args()[5:])
    )


def test_the_api_previews_then_replays_once(
    client: TestClient, world: World, session: Session
) -> None:
    body = {"since": SINCE, "until": UNTIL, "dryRun": True}
    preview = client.post(world.url, json=body, headers=AUTH)
    assert preview.status_code == 200, preview.text
    assert preview.json() == {"count": 5, "matching": 5, "capped": False, "dryRun": True}
    assert _due(session) == 0
    body = {"since": SINCE, "until": UNTIL, "statuses": ["dead", "succeeded"]}
    assert client.post(world.url, json=body, headers=AUTH).json()["count"] == 6
    assert client.post(world.url, json=body, headers=AUTH).json()["count"] == 0
    assert _due(session) == 6


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"since": "soon", "until": UNTIL}, "since must be a time to the minute"),
        ({"since": UNTIL, "until": SINCE}, "since must be before until"),
        ({"since": SINCE, "until": UNTIL, "statuses": ["pending"]}, '"pending" is not a status'),
        ({"since": SINCE, "until": UNTIL, "events": ["nope"]}, '"nope" is not an event kind'),
        ({"since": f"{SINCE}\u0000", "until": UNTIL}, "NUL"),
        ({"since": SINCE, "until": UNTIL, "dryRun": "yes"}, "dryRun"),
        ({"since": SINCE, "until": UNTIL, "from": SINCE}, "from"),
        ({"since": SINCE}, "until"),
    ],
)
def test_the_api_refuses_bad_input_precisely(
    client: TestClient, world: World, body: dict[str, object], needle: str
) -> None:
    answer = client.post(world.url, json=body, headers=AUTH)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert needle in answer.json()["detail"]


def test_the_api_answers_409_while_the_endpoint_is_off_and_404_for_another_clubs(
    client: TestClient, world: World, session: Session
) -> None:
    endpoints.disable_endpoint(
        session, world.club_id, world.endpoint_id, EPOCH, off_reasons.OffReason.STAFF
    )
    session.commit()
    body = {"since": SINCE, "until": UNTIL}
    refused = client.post(world.url, json=body, headers=AUTH)
    assert refused.status_code == 409
    assert refused.json()["code"] == "conflict"
    assert "switched off" in refused.json()["detail"]
    make_club(session, "pebble")
    session.commit()
    elsewhere = world.url.replace("/granite/", "/pebble/")
    assert client.post(elsewhere, json=body, headers=AUTH).status_code == 404


def test_the_replay_route_is_documented(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    operation = paths["/internal/v1/clubs/{slug}/endpoints/{endpoint_id}/replays"]["post"]
    assert {"200", "404", "409", "422"} <= set(operation["responses"])
    assert operation["security"] == [{"platformToken": []}]
