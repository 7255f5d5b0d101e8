"""The worker's database steps against DESIGN §6: claim, lease, record, schedule, switch-off."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import event_catalog
from clubwire.domain.retry import RetrySchedule
from clubwire.services import claims, deliveries, endpoints, events, records
from clubwire.settings import Settings
from clubwire.storage import database
from clubwire.storage.models import Attempt, Club, Delivery, Endpoint
from tests.factories import EPOCH, make_club, make_endpoint, registration

SCHEDULE = RetrySchedule((60, 300, 1800, 7200, 43200))
LEASE = timedelta(seconds=60)


def _claim(sessions: sessionmaker[Session], at: timedelta = timedelta()) -> list[claims.Job]:
    """Everything due, as a worker finds and claims it."""
    with sessions.begin() as session:
        due = claims.due_endpoints(session, EPOCH + at)
        return claims.claim(session, EPOCH + at, LEASE, dict.fromkeys(due, 100))


def _record(
    sessions: sessionmaker[Session],
    jobs: list[claims.Job],
    ok: bool,
    at: timedelta = timedelta(),
    code: int | None = None,
) -> None:
    results = [
        records.Result(
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
        records.record(session, results, SCHEDULE, EPOCH + at)


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
            step = SCHEDULE.delays[delivery.attempt - 1]
            assert step <= gap.total_seconds() <= step * (1 + SCHEDULE.spread)
    assert seen == [("pending", n) for n in range(1, 6)] + [("dead", 6)]
    assert _endpoint(sessions, endpoint_id).dead_in_a_row == 1
    with sessions() as session:
        assert len(session.scalars(select(Attempt)).all()) == 6


def test_retries_that_failed_together_come_due_spread_over_their_step(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Twenty deliveries of one endpoint fail in one batch: each retry is due at least a
    step (60 s) later, at most 10 % more, and they do not all come due in the same second."""
    _world(sessions, settings, count=20)
    _record(sessions, _claim(sessions), ok=False)

    with sessions() as session:
        due = [d.next_attempt_at for d in session.scalars(select(Delivery))]
    assert all(d is not None and EPOCH + timedelta(seconds=60) <= d for d in due)
    assert all(d is not None and d <= EPOCH + timedelta(seconds=66) for d in due)
    spread = max(d for d in due if d) - min(d for d in due if d)
    assert spread >= timedelta(seconds=1)


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


def test_a_claim_takes_what_each_endpoint_asks_for_oldest_first(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    with sessions.begin() as session:
        club = make_club(session)
        first, _ = make_endpoint(session, club, settings)
        second, _ = make_endpoint(session, club, settings)
        published = [
            events.publish(session, club, "registration.created", registration(), EPOCH + at)[0]
            for at in (timedelta(seconds=2), timedelta(seconds=1), timedelta(seconds=3))
        ]
    with sessions.begin() as session:
        jobs = claims.claim(session, EPOCH + timedelta(seconds=5), LEASE, {first.id: 2})
    assert {job.endpoint_id for job in jobs} == {first.id}
    assert {event_catalog.id_of(job.body) for job in jobs} == {published[1].id, published[0].id}
    left = _claim(sessions, timedelta(seconds=5))
    assert {(job.endpoint_id, event_catalog.id_of(job.body)) for job in left} == {
        (first.id, published[2].id),
        *((second.id, event.id) for event in published),
    }


def test_due_endpoints_are_found_once_each_the_longest_waiting_first(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    with sessions.begin() as session:
        club = make_club(session)
        made = [make_endpoint(session, club, settings)[0] for _ in range(3)]
        idle = make_endpoint(session, club, settings)[0]
        for _ in range(3):
            events.publish(session, club, "registration.created", registration(), EPOCH)
        endpoints.disable_endpoint(session, club.id, idle.id, EPOCH)
    newest, middle, oldest = made
    with sessions.begin() as session:
        session.execute(
            update(Delivery)
            .where(Delivery.endpoint_id == newest.id)
            .values(next_attempt_at=EPOCH + timedelta(seconds=30))
        )
        session.execute(
            update(Delivery)
            .where(Delivery.endpoint_id == middle.id)
            .values(next_attempt_at=EPOCH + timedelta(seconds=20))
        )
    with sessions() as session:
        assert claims.due_endpoints(session, EPOCH + timedelta(seconds=10)) == [oldest.id]
        now = EPOCH + timedelta(seconds=40)
        assert claims.due_endpoints(session, now) == [oldest.id, middle.id, newest.id]
    with sessions.begin() as session:  # leased deliveries are not due until the lease runs out
        claims.claim(session, now, LEASE, {middle.id: 3})
    with sessions() as session:
        assert claims.due_endpoints(session, now) == [oldest.id, newest.id]
        assert claims.due_endpoints(session, now + LEASE * 2) == [
            oldest.id,
            middle.id,
            newest.id,
        ]


def test_attempts_are_stored_exactly_as_they_happened(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _world(sessions, settings, count=2)
    first, second = _claim(sessions)
    awkward = 'he said "hi" \\ \n\t\u2028 é 😀 <b>&amp;</b> \ufffd'
    results = [
        records.Result(first, EPOCH, False, 503, None, 1234, awkward),
        records.Result(second, EPOCH, False, None, "tls: host name mismatch", 7, ""),
    ]
    with sessions.begin() as session:
        records.record(session, results, SCHEDULE, EPOCH)
    with sessions() as session:
        stored = {
            a.delivery_id: (
                a.number,
                a.trigger,
                a.started_at,
                a.duration_ms,
                a.response_code,
                a.error,
                a.excerpt,
            )
            for a in session.scalars(select(Attempt))
        }
        moved = {
            d.id: (d.status, d.attempt, d.response_code) for d in session.scalars(select(Delivery))
        }
    assert stored == {
        first.delivery_id: (1, "scheduled", EPOCH, 1234, 503, None, awkward),
        second.delivery_id: (1, "scheduled", EPOCH, 7, None, "tls: host name mismatch", ""),
    }
    assert moved == {
        first.delivery_id: ("pending", 1, 503),
        second.delivery_id: ("pending", 1, None),
    }


def test_a_test_send_never_counts_toward_dead_in_a_row(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _world(sessions, settings, count=0)
    with sessions.begin() as session:
        job = claims.create_test_job(
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


def test_a_workers_postgresql_connection_never_waits_to_flush_nor_compiles(
    settings: Settings,
) -> None:
    if settings.is_sqlite:
        pytest.skip("synchronous_commit and JIT are PostgreSQL's")
    engine = database.engine_for(settings, worker=True)
    try:
        with engine.connect() as connection:
            shown = [
                connection.scalar(text(f"SHOW {name}")) for name in ("synchronous_commit", "jit")
            ]
    finally:
        engine.dispose()
    assert shown == ["off", "off"]
