"""The worker's database steps against DESIGN §6: claim, lease, record, schedule, switch-off."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain.retry import RetrySchedule
from clubwire.services import deliveries, dispatch, endpoints, events
from clubwire.settings import Settings
from clubwire.storage.models import Attempt, Club, Delivery, Endpoint
from tests.factories import EPOCH, make_club, make_endpoint, registration

SCHEDULE = RetrySchedule((60, 300, 1800, 7200, 43200))
LEASE = timedelta(seconds=60)


def _claim(
    sessions: sessionmaker[Session], at: timedelta = timedelta(), **kw: object
) -> list[dispatch.Job]:
    with sessions.begin() as session:
        return dispatch.claim(session, EPOCH + at, 100, LEASE, **kw)  # type: ignore[arg-type]


def _record(
    sessions: sessionmaker[Session],
    jobs: list[dispatch.Job],
    ok: bool,
    at: timedelta = timedelta(),
    code: int | None = None,
) -> None:
    results = [
        dispatch.Result(
            job,
            EPOCH + at,
            ok,
            code if code is not None else (200 if ok else 500),
            None,
            12,
            "body",
        )
        for job in jobs
    ]
    with sessions.begin() as session:
        dispatch.record(session, results, SCHEDULE, EPOCH + at)


def _world(sessions: sessionmaker[Session], settings: Settings, count: int = 1) -> tuple[str, str]:
    with sessions.begin() as session:
        club = make_club(session)
        endpoint, _ = make_endpoint(session, club, settings)
        for _ in range(count):
            events.publish(session, club, "registration.created", registration(), EPOCH)
        return club.id, endpoint.id


def _delivery(sessions: sessionmaker[Session]) -> Delivery:
    with sessions() as session:
        return session.scalars(select(Delivery)).one()


def _endpoint(sessions: sessionmaker[Session], endpoint_id: str) -> Endpoint:
    with sessions() as session:
        return session.get_one(Endpoint, endpoint_id)


def test_a_claim_leases_so_no_one_else_takes_it(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _world(sessions, settings)
    jobs = _claim(sessions)
    assert len(jobs) == 1
    assert jobs[0].body.startswith(b'{"id":"evt_')
    assert _claim(sessions) == []
    assert _claim(sessions, timedelta(seconds=59)) == []
    assert len(_claim(sessions, timedelta(seconds=61))) == 1  # the lease ran out: claimed again


def test_success_finishes_the_delivery(sessions: sessionmaker[Session], settings: Settings) -> None:
    _, endpoint_id = _world(sessions, settings)
    _record(sessions, _claim(sessions), ok=True)
    delivery = _delivery(sessions)
    assert (delivery.status, delivery.attempt, delivery.next_attempt_at, delivery.lease_until) == (
        "succeeded",
        1,
        None,
        None,
    )
    assert delivery.response_code == 200
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.last_response_code, endpoint.last_delivery_at) == (200, EPOCH)


def test_failures_follow_the_schedule_then_die(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _, endpoint_id = _world(sessions, settings)
    at = timedelta()
    seen = []
    for _ in range(6):
        jobs = _claim(sessions, at)
        assert len(jobs) == 1
        _record(sessions, jobs, ok=False, at=at)
        delivery = _delivery(sessions)
        seen.append((delivery.status, delivery.attempt))
        if delivery.next_attempt_at is not None:
            gap = delivery.next_attempt_at - (EPOCH + at)
            assert _claim(sessions, at + gap - timedelta(seconds=1)) == []
            at += gap
            assert gap.total_seconds() == SCHEDULE.delays[delivery.attempt - 1]
    assert seen == [("pending", n) for n in range(1, 6)] + [("dead", 6)]
    assert _endpoint(sessions, endpoint_id).dead_in_a_row == 1
    with sessions() as session:
        assert len(session.scalars(select(Attempt)).all()) == 6


def _kill(sessions: sessionmaker[Session], count: int) -> None:
    """Make ``count`` deliveries die (six failed attempts each)."""
    at = timedelta()
    for _ in range(6):
        jobs = _claim(sessions, at)
        assert len(jobs) == count
        _record(sessions, jobs, ok=False, at=at)
        at += timedelta(days=1)


def test_five_dead_in_a_row_switch_the_endpoint_off(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _world(sessions, settings, count=5)
    with sessions.begin() as session:  # one more, waiting: it becomes skipped at switch-off
        events.publish(
            session,
            session.get_one(Club, club_id),
            "registration.created",
            registration(),
            EPOCH + timedelta(days=30),
        )
    _kill(sessions, 5)
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.enabled, endpoint.dead_in_a_row) == (False, 5)
    assert endpoint.disabled_reason == "Switched off after 5 dead deliveries in a row"
    assert endpoint.disabled_at is not None
    with sessions() as session:
        statuses = sorted(d.status for d in session.scalars(select(Delivery)))
    assert statuses == ["dead"] * 5 + ["skipped"]
    with sessions.begin() as session:
        _, resent = endpoints.enable_endpoint(
            session, club_id, endpoint_id, EPOCH, resend_skipped=True
        )
    assert resent == 1
    assert _endpoint(sessions, endpoint_id).dead_in_a_row == 0


def test_a_success_resets_dead_in_a_row(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _world(sessions, settings, count=2)
    _kill(sessions, 2)
    assert _endpoint(sessions, endpoint_id).dead_in_a_row == 2
    with sessions.begin() as session:
        events.publish(
            session,
            session.get_one(Club, club_id),
            "registration.created",
            registration(),
            EPOCH + timedelta(days=9),
        )
    _record(sessions, _claim(sessions, timedelta(days=9)), ok=True, at=timedelta(days=9))
    assert _endpoint(sessions, endpoint_id).dead_in_a_row == 0


def test_retry_brings_a_waiting_attempt_forward(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, _ = _world(sessions, settings)
    _record(sessions, _claim(sessions), ok=False)
    assert _claim(sessions, timedelta(seconds=10)) == []
    with sessions.begin() as session:
        deliveries.retry(session, club_id, _delivery(sessions).id, EPOCH + timedelta(seconds=10))
    jobs = _claim(sessions, timedelta(seconds=10))
    assert [job.trigger for job in jobs] == ["manual"]
    _record(sessions, jobs, ok=True, at=timedelta(seconds=10))
    with sessions() as session:
        assert [a.trigger for a in session.scalars(select(Attempt).order_by(Attempt.number))] == [
            "scheduled",
            "manual",
        ]


def test_retry_of_a_dead_delivery_makes_one_attempt(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _world(sessions, settings)
    _kill(sessions, 1)
    later = timedelta(days=10)
    with sessions.begin() as session:
        deliveries.retry(session, club_id, _delivery(sessions).id, EPOCH + later)
    _record(sessions, _claim(sessions, later), ok=False, at=later)
    delivery = _delivery(sessions)
    assert (delivery.status, delivery.attempt, delivery.next_attempt_at) == ("dead", 7, None)
    assert _endpoint(sessions, endpoint_id).dead_in_a_row == 1  # not counted twice
    with sessions.begin() as session:
        deliveries.retry(session, club_id, delivery.id, EPOCH + later)
    _record(sessions, _claim(sessions, later), ok=True, at=later)
    assert _delivery(sessions).status == "succeeded"
    assert _endpoint(sessions, endpoint_id).dead_in_a_row == 0


def test_retry_needs_the_endpoint_on(sessions: sessionmaker[Session], settings: Settings) -> None:
    club_id, endpoint_id = _world(sessions, settings)
    with sessions.begin() as session:
        endpoints.disable_endpoint(session, club_id, endpoint_id, EPOCH)
    with sessions.begin() as session, pytest.raises(errors.InvalidInput, match="switched off"):
        deliveries.retry(session, club_id, _delivery(sessions).id, EPOCH)


def test_a_claimed_delivery_of_a_switched_off_endpoint_is_skipped(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _, endpoint_id = _world(sessions, settings)
    with sessions.begin() as session:
        session.get_one(
            Endpoint, endpoint_id
        ).enabled = False  # switched off behind the service's back
    assert _claim(sessions) == []
    assert _delivery(sessions).status == "skipped"


def test_a_worker_that_lost_its_lease_does_not_overwrite(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _world(sessions, settings)
    stale = _claim(sessions)
    fresh = _claim(sessions, timedelta(seconds=61))
    _record(sessions, fresh, ok=True, at=timedelta(seconds=62))
    _record(sessions, stale, ok=False, at=timedelta(seconds=63))
    assert _delivery(sessions).status == "succeeded"


def test_busy_endpoints_are_left_out_of_a_claim(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _, endpoint_id = _world(sessions, settings, count=3)
    assert _claim(sessions, busy_endpoints=[endpoint_id]) == []
    jobs = _claim(sessions)
    with sessions.begin() as session:
        dispatch.release(session, jobs[1:])
    assert len(_claim(sessions)) == 2


def test_a_test_send_never_counts_toward_dead_in_a_row(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _world(sessions, settings, count=0)
    with sessions.begin() as session:
        job = dispatch.create_test_job(
            session, session.get_one(Club, club_id), endpoint_id, EPOCH, LEASE
        )
    assert job.kind == "ping"
    assert _claim(sessions) == []  # a test is sent by its caller, never by a worker
    _record(sessions, [job], ok=False)
    assert (_delivery(sessions).status, _endpoint(sessions, endpoint_id).dead_in_a_row) == (
        "dead",
        0,
    )
    assert _endpoint(sessions, endpoint_id).last_response_code == 500


def test_attempts_of_a_deleted_endpoint_are_dropped(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _world(sessions, settings, count=2)
    jobs = _claim(sessions)
    with sessions.begin() as session:
        endpoints.delete_endpoint(session, club_id, endpoint_id)
    _record(sessions, jobs, ok=True)
    with sessions() as session:
        assert session.scalars(select(Attempt)).all() == []
        assert session.scalars(select(Delivery)).all() == []
