"""A ``clubwire serve`` keeps what a publish reads that rarely changes (a club's switch, its
endpoints' subscriptions; issue 38 item 2): a change another process commits is seen by
the server's next publish, with no notice to wait for."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import orjson
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs, endpoints
from clubwire.settings import Settings
from clubwire.storage.models import Delivery
from tests.conftest import PLATFORM_TOKEN
from tests.factories import EPOCH, make_club, make_endpoint, receiver_settings, registration
from tests.functional import processes

KIND = "registration.created"


def _publish(base: str, sessions: sessionmaker[Session]) -> list[str]:
    """Publish through the server's internal API; the endpoints given a delivery due."""
    request = urllib.request.Request(
        f"{base}/internal/v1/clubs/granite/events",
        data=orjson.dumps({"event": KIND, "data": registration()}),
        headers={"Authorization": f"Bearer {PLATFORM_TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 201
        event_id = orjson.loads(answer.read())["id"]
    with sessions() as session:
        query = select(Delivery.endpoint_id).where(
            Delivery.event_id == event_id, Delivery.status == "pending"
        )
        return sorted(session.scalars(query))


def test_changes_another_process_commits_are_seen_by_the_servers_next_publish(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    with sessions.begin() as session:
        club = make_club(session, "granite")
        first, second = sorted(make_endpoint(session, club, settings)[0].id for _ in range(2))
        club_id = club.id
    hooks = receiver_settings(settings)
    changes: list[tuple[Callable[[Session], object], list[str]]] = [
        (lambda s: endpoints.delete_endpoint(s, club_id, first), [second]),
        (
            lambda s: endpoints.update_endpoint(
                s, club_id, second, EPOCH, hooks, kinds=["payment.completed"]
            ),
            [],
        ),
        (
            lambda s: endpoints.update_endpoint(s, club_id, second, EPOCH, hooks, kinds=[KIND]),
            [second],
        ),
        (lambda s: clubs.set_webhooks_module(s, "granite", False, EPOCH), []),
    ]
    with ExitStack() as stack:
        (url,) = processes.servers(
            stack, settings, tmp_path, 1, CLUBWIRE_PLATFORM_TOKEN=PLATFORM_TOKEN
        )
        base = url.removesuffix("/clubs/granite/api/v1/programs")
        assert _publish(base, sessions) == [first, second]  # kept from here on
        for change, expected in changes:
            with sessions.begin() as session:
                change(session)
            assert _publish(base, sessions) == expected
