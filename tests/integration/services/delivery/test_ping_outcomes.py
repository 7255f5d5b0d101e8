"""How Send tests read among an endpoint's deliveries (``pings.outcomes``): as tests with
their outcome, from their one recorded attempt; real deliveries are not theirs to tell."""

from __future__ import annotations

import random
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Job, Result, RetrySchedule, judge
from clubwire.services.delivery import claims, deliveries, events, pings, records
from clubwire.settings import Settings
from clubwire.storage.models import Club
from tests.factories import EPOCH, make_club, make_endpoint, registration

SCHEDULE = RetrySchedule((60, 300))
LEASE = timedelta(seconds=60)


def _test_job(sessions: sessionmaker[Session], club_id: str, endpoint_id: str) -> Job:
    with sessions.begin() as session:
        return claims.create_test_job(
            session, session.get_one(Club, club_id), endpoint_id, EPOCH, LEASE
        )


def _record(
    sessions: sessionmaker[Session], job: Job, ok: bool, code: int | None, error: str | None
) -> None:
    verdict = judge(job, ok, EPOCH, SCHEDULE, random.random())
    result = Result(job, EPOCH, ok, code, error, 43, "", verdict)
    with sessions.begin() as session:
        records.record(session, [result], EPOCH)


def _club_with_one_delivery(sessions: sessionmaker[Session], settings: Settings) -> tuple[str, str]:
    """A club and its endpoint with one real delivery; their ids."""
    with sessions.begin() as session:
        club = make_club(session)
        endpoint, _ = make_endpoint(session, club, settings)
        events.publish(session, club, "registration.created", registration(), EPOCH)
        return club.id, endpoint.id


def test_each_send_test_reads_as_a_test_with_its_outcome(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _club_with_one_delivery(sessions, settings)
    passed, failed, refused, sending = (_test_job(sessions, club_id, endpoint_id) for _ in range(4))
    _record(sessions, passed, True, 200, None)
    _record(sessions, failed, False, 500, None)
    _record(sessions, refused, False, None, "connection refused")
    with sessions() as session:
        shown = deliveries.list_deliveries(session, club_id, endpoint_id)
        read = pings.outcomes(session, shown)
    assert len(shown) == 5  # the real delivery is among them, and not in ``read``
    assert read == {
        passed.delivery_id: pings.PingOutcome(True, "Test: 200 in 43 ms"),
        failed.delivery_id: pings.PingOutcome(
            False, "Test failed: the receiver answered 500 (after 43 ms)"
        ),
        refused.delivery_id: pings.PingOutcome(
            False, "Test failed: connection refused (after 43 ms)"
        ),
        sending.delivery_id: pings.PingOutcome(None, "Test: sending"),
    }


def test_without_send_tests_nothing_is_read(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _club_with_one_delivery(sessions, settings)
    with sessions() as session:
        shown = deliveries.list_deliveries(session, club_id, endpoint_id)
        assert len(shown) == 1
        assert pings.outcomes(session, shown) == {}
