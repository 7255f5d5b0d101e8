"""A 429 storm: the endpoint that answers it gets one attempt at a time, its neighbour keeps its
width (issue 33 item 2, ADR 0015), with real TLS receivers on both databases."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.settings import Settings
from clubwire.storage.models import Attempt
from tests.functional.workers import add_endpoint, deliver_until, publish_registrations
from tests.receiver import Authority, serving

EVENTS = 40  # to each club: a first wave as wide as the lane, and more after it


def test_an_endpoint_answering_429_gets_one_attempt_at_a_time_and_its_neighbour_all_it_can(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    """The first wave goes out as wide as a lane may (16 in flight); each 429 halves the width
    and every runner over it ends, so every later request arrives alone. The healthy endpoint of
    another club, its deliveries due at the same time, gets them all, many at once. Retries
    come after an hour: each storming delivery is attempted once."""
    settings = hooks.model_copy(update={"retry_schedule": (3600,) * 5})
    width = settings.max_in_flight_per_endpoint
    with (
        serving(tls, status=429, delay=0.05) as storming,
        serving(tls, delay=0.05) as healthy,
    ):
        add_endpoint(sessions, settings, storming.url, slug="granite")
        add_endpoint(sessions, settings, healthy.url, slug="basalt")
        publish_registrations(sessions, EVENTS, slug="granite")
        publish_registrations(sessions, EVENTS, slug="basalt")
        deliver_until(settings, sessions, lambda: _attempts(sessions) == 2 * EVENTS)
        stormed, served = storming.wait_for(EVENTS), healthy.wait_for(EVENTS)
    assert max(request.in_flight for request in stormed[:width]) > 1
    assert [request.in_flight for request in stormed[width:]] == [1] * (EVENTS - width)
    assert max(request.in_flight for request in served) > 1


def _attempts(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(Attempt)) or 0
