"""The worker's database steps against DESIGN §6 and ADR 0008: lease lanes, claim, record,
give back, schedule, switch-off."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import event_catalog, off_reasons
from clubwire.domain.custom_headers import Header
from clubwire.domain.delivering import Job, Result, RetrySchedule, judge
from clubwire.services import endpoints
from clubwire.services.delivery import claims, deliveries, events, records
from clubwire.services.mail import notifications
from clubwire.settings import Settings
from clubwire.storage import database, queue
from clubwire.storage.models import Attempt, Club, Delivery, Endpoint, OutboxEmail
from clubwire.storage.queue import START, Want, postgres, rows
from tests.factories import EPOCH, make_club, make_endpoint, make_staff, registration

SCHEDULE = RetrySchedule((60, 300, 1800, 7200, 43200))
GONE = 410
LEASE = timedelta(seconds=60)
ME, OTHER = "wkr_me", "wkr_other"


def _lanes(
    sessions: sessionmaker[Session], at: timedelta = timedelta(), token: str = ME
) -> list[str]:
    """The lanes a worker leases at ``at``, in the order it gets them."""
    now = EPOCH + at
    with sessions.begin() as session:
        return [
            lane.endpoint_id for lane in claims.take_lanes(session, now, now + LEASE, token, 100)
        ]


def _claim(
    sessions: sessionmaker[Session], at: timedelta = timedelta(), token: str = ME
) -> list[Job]:
    """Everything due, as a worker leases the lanes and claims their jobs."""
    now = EPOCH + at
    with sessions.begin() as session:
        lanes = claims.take_lanes(session, now, now + LEASE, token, 100)
    with sessions() as session:
        wants = {lane.endpoint_id: Want(lane, 100, now + LEASE) for lane in lanes}
        return claims.claim(session, now, token, wants).jobs


def _record(
    sessions: sessionmaker[Session],
    jobs: list[Job],
    ok: bool,
    at: timedelta = timedelta(),
    code: int | None = None,
    token: str = ME,
    mail: notifications.FailureMail | None = None,
) -> None:
    """Record the attempts, then give their lanes back, as a worker does."""
    now = EPOCH + at
    answered = code if code is not None else (200 if ok else 500)
    results = [
        Result(
            job,
            now,
            ok,
            answered,
            None,
            12,
            "body",
            judge(job, ok, now, SCHEDULE, random.random(), code=answered),
        )
        for job in jobs
    ]
    with sessions.begin() as session:
        records.record(session, results, now, mail)
    with sessions.begin() as session:
        claims.give_back(session, sorted({job.endpoint_id for job in jobs}), token, now)


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


def test_a_lane_is_leased_so_no_one_else_takes_it(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _world(sessions, settings)
    jobs = _claim(sessions)
    assert len(jobs) == 1
    assert jobs[0].body.startswith(b'{"id":"evt_')
    assert (jobs[0].lease, jobs[0].lease_until) == (ME, EPOCH + LEASE)
    assert _claim(sessions, token=OTHER) == []
    assert _claim(sessions, timedelta(seconds=59), token=OTHER) == []
    # The lease ran out: the lane is leased again, and the delivery claimed again.
    assert len(_claim(sessions, timedelta(seconds=61), token=OTHER)) == 1


def test_a_claim_writes_no_delivery(sessions: sessionmaker[Session], settings: Settings) -> None:
    _world(sessions, settings, count=3)
    with sessions() as session:
        before = [(d.id, d.updated_at, d.status) for d in session.scalars(select(Delivery))]
    assert len(_claim(sessions)) == 3
    with sessions() as session:
        after = [(d.id, d.updated_at, d.status) for d in session.scalars(select(Delivery))]
    assert after == before


def test_a_claimed_job_carries_its_event_body_byte_for_byte(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Signatures cover the stored bytes, so a claim hands them over exactly, whatever they
    hold (SQLite's claim reads a lane's jobs as one JSON row, bodies in hex)."""
    body = b'{"id":"evt_1","data":"\x00\xff\xfe \xe2\x80\xae \\u0000 \n"}'
    with sessions.begin() as session:
        club = make_club(session)
        make_endpoint(session, club, settings)
        events.publish(session, club, "registration.created", registration(), EPOCH)
        session.execute(text("UPDATE events SET body = :body"), {"body": body})
    [job] = _claim(sessions)
    assert (job.body, job.kind) == (body, "registration.created")


def test_a_lane_given_back_is_due_when_its_next_delivery_is(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _, endpoint_id = _world(sessions, settings, count=2)
    first, second = _claim(sessions)
    _record(sessions, [first], ok=True)  # the second was never attempted: still due
    assert [job.delivery_id for job in _claim(sessions, token=OTHER)] == [second.delivery_id]
    _record(sessions, [second], ok=False, token=OTHER)
    with sessions() as session:
        retry_at = session.get_one(Delivery, second.delivery_id).next_attempt_at
        assert retry_at is not None
        assert claims.next_due(session, EPOCH) == retry_at
    assert _lanes(sessions, retry_at - EPOCH - timedelta(seconds=1)) == []
    assert _lanes(sessions, retry_at - EPOCH) == [endpoint_id]


def test_success_finishes_the_delivery(sessions: sessionmaker[Session], settings: Settings) -> None:
    _, endpoint_id = _world(sessions, settings)
    _record(sessions, _claim(sessions), ok=True)
    delivery = _delivery(sessions)
    assert (delivery.status, delivery.attempt, delivery.next_attempt_at) == ("succeeded", 1, None)
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
    assert endpoint.disabled_reason == "dead_in_a_row"
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


def _wait_later(sessions: sessionmaker[Session], club_id: str) -> None:
    """One more delivery, due in a month: still waiting when the endpoint is switched off."""
    with sessions.begin() as session:
        club = session.get_one(Club, club_id)
        events.publish(
            session, club, "registration.created", registration(), EPOCH + timedelta(days=30)
        )


def _statuses(sessions: sessionmaker[Session]) -> list[tuple[str, int]]:
    with sessions() as session:
        return sorted((d.status, d.attempt) for d in session.scalars(select(Delivery)))


def test_a_410_kills_the_delivery_and_switches_the_endpoint_off_at_once(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _world(sessions, settings)
    _wait_later(sessions, club_id)
    _record(sessions, _claim(sessions), ok=False, code=GONE, at=timedelta(seconds=3))
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.dead_in_a_row) == (
        False,
        "gone",
        1,
    )
    assert endpoint.disabled_at == EPOCH + timedelta(seconds=3)
    assert endpoint.last_response_code == GONE
    assert _statuses(sessions) == [("dead", 1), ("skipped", 0)]
    with sessions.begin() as session:
        _, resent = endpoints.enable_endpoint(
            session, club_id, endpoint_id, EPOCH, resend_skipped=True
        )
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.dead_in_a_row) == (True, None, 0)
    assert resent == 1


def test_a_gone_endpoint_is_switched_off_and_its_admins_told_once(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Two 410s in one batch, then one more of a delivery that was in flight: one switch-off
    (its time the first one's), one email to each admin."""
    club_id, endpoint_id = _world(sessions, settings, count=3)
    make_staff(sessions, "ann@granite.example", clubs=["granite"])
    make_staff(sessions, "bob@granite.example", clubs=["granite"])
    mail = notifications.FailureMail("https://hooks.granite.example")
    first, second, in_flight = _claim(sessions)
    _record(sessions, [first, second], ok=False, code=GONE, mail=mail)
    _record(sessions, [in_flight], ok=False, code=GONE, at=timedelta(seconds=9), mail=mail)
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.disabled_at) == (
        False,
        "gone",
        EPOCH,
    )
    assert _statuses(sessions) == [("dead", 1), ("dead", 1), ("skipped", 0)]
    with sessions() as session:
        emails = session.scalars(select(OutboxEmail).order_by(OutboxEmail.recipient)).all()
    assert [e.recipient for e in emails] == ["ann@granite.example", "bob@granite.example"]
    assert all("receiver answered 410 Gone" in e.body for e in emails)
    assert all("in a row" not in e.body for e in emails)
    assert {e.club_id for e in emails} == {club_id}


def test_a_send_test_answered_410_switches_nothing_off(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _world(sessions, settings)
    with sessions.begin() as session:
        club = session.get_one(Club, club_id)
        ping = claims.create_test_job(session, club, endpoint_id, EPOCH, LEASE)
    _record(sessions, [ping], ok=False, code=GONE)
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.dead_in_a_row) == (True, None, 0)
    assert _statuses(sessions) == [("dead", 1), ("pending", 0)]  # the ping; the delivery waits


def test_one_batch_switches_one_endpoint_off_as_gone_and_another_as_dead_in_a_row(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    with sessions.begin() as session:
        club = make_club(session)
        gone, _ = make_endpoint(session, club, settings)
        failing, _ = make_endpoint(session, club, settings)
        events.publish(session, club, "registration.created", registration(), EPOCH)
        session.get_one(Endpoint, failing.id).dead_in_a_row = 4
    codes = {gone.id: GONE, failing.id: 503}
    last_try = RetrySchedule(())  # each failed attempt is its delivery's last
    results = [
        Result(
            job, EPOCH, False, code, None, 12, "", judge(job, False, EPOCH, last_try, 0, code=code)
        )
        for job, code in ((job, codes[job.endpoint_id]) for job in _claim(sessions))
    ]
    with sessions.begin() as session:
        records.record(session, results, EPOCH)
    with sessions() as session:
        off = session.execute(select(Endpoint.id, Endpoint.enabled, Endpoint.disabled_reason))
        reasons = {endpoint_id: (enabled, reason) for endpoint_id, enabled, reason in off}
    assert reasons == {gone.id: (False, "gone"), failing.id: (False, "dead_in_a_row")}


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
        endpoints.disable_endpoint(
            session, club_id, endpoint_id, EPOCH, off_reasons.OffReason.STAFF
        )
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
    _, endpoint_id = _world(sessions, settings)
    stale = _claim(sessions)
    fresh = _claim(sessions, timedelta(seconds=61), token=OTHER)
    _record(sessions, fresh, ok=True, at=timedelta(seconds=62), token=OTHER)
    _record(sessions, stale, ok=False, at=timedelta(seconds=63))
    assert _delivery(sessions).status == "succeeded"
    with sessions() as session:  # both attempts happened, and both are kept
        assert len(session.scalars(select(Attempt)).all()) == 2
    assert _endpoint(sessions, endpoint_id).last_response_code == 500


def test_a_lease_is_renewed_and_given_back_only_by_its_holder(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _, endpoint_id = _world(sessions, settings)
    assert _lanes(sessions) == [endpoint_id]
    later = EPOCH + timedelta(seconds=50)
    with sessions.begin() as session:
        assert claims.take_lanes(session, later, later + LEASE, OTHER, 10, held=[endpoint_id]) == []
        renewed = claims.take_lanes(session, later, later + LEASE, ME, 10, held=[endpoint_id])
        assert [lane.endpoint_id for lane in renewed] == [endpoint_id]
        claims.give_back(session, [endpoint_id], OTHER, later)  # not the holder's: nothing
    assert _lanes(sessions, timedelta(seconds=100), token=OTHER) == []  # renewed until 110 s
    assert _lanes(sessions, timedelta(seconds=111), token=OTHER) == [endpoint_id]


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
    now = EPOCH + timedelta(seconds=5)
    with sessions.begin() as session:
        lanes = {lane.endpoint_id: lane for lane in claims.take_lanes(session, now, now, ME, 9)}
    with sessions() as session:
        jobs, _ = claims.claim(session, now, ME, {first.id: Want(lanes[first.id], 2, now + LEASE)})
        assert {job.endpoint_id for job in jobs} == {first.id}
        assert [event_catalog.id_of(job.body) for job in jobs] == [published[1].id, published[0].id]
        held = {first.id: [job.delivery_id for job in jobs]}
        wants = {
            endpoint_id: Want(lane, 100, now + LEASE, held=held.get(endpoint_id, ()))
            for endpoint_id, lane in lanes.items()
        }
        left, _ = claims.claim(session, now, ME, wants)
    assert {(job.endpoint_id, event_catalog.id_of(job.body)) for job in left} == {
        (first.id, published[2].id),
        *((second.id, event.id) for event in published),
    }


def test_a_lanes_claim_goes_on_from_where_the_last_one_reached_in_due_time_then_id_order(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Deliveries due at the same time (one transaction's publishes) come in id order, so a
    place (due time, id) splits them exactly; held jobs beyond the place are passed over."""
    with sessions.begin() as session:
        club = make_club(session)
        make_endpoint(session, club, settings)
        for at in (2, 1, 1, 1, 1, 3, 1):
            events.publish(
                session, club, "registration.created", registration(), EPOCH + timedelta(seconds=at)
            )
    now = EPOCH + timedelta(seconds=5)
    with sessions.begin() as session:
        (lane,) = claims.take_lanes(session, now, now + LEASE, ME, 9)
    with sessions() as session:
        order = [
            job.delivery_id
            for job in claims.claim(session, now, ME, {lane.endpoint_id: Want(lane, 9, now)}).jobs
        ]
        first = claims.claim(session, now, ME, {lane.endpoint_id: Want(lane, 3, now)})
        place = first.reached[lane.endpoint_id]
        rest = claims.claim(session, now, ME, {lane.endpoint_id: Want(lane, 9, now, place)})
        held = [order[4]]
        past = claims.claim(session, now, ME, {lane.endpoint_id: Want(lane, 9, now, place, held)})
        due = {
            row[0]: row[1] for row in session.execute(select(Delivery.id, Delivery.next_attempt_at))
        }
    assert order == sorted(order, key=lambda delivery_id: (due[delivery_id], delivery_id))
    assert len(order) == 7
    assert order[1:5] == sorted(order[1:5])  # the four due at once
    assert place == (due[order[2]], order[2])
    assert [job.delivery_id for job in first.jobs] == order[:3]
    assert [job.delivery_id for job in rest.jobs] == order[3:]
    assert [job.delivery_id for job in past.jobs] == [order[3], *order[5:]]
    assert past.reached[lane.endpoint_id] == (due[order[6]], order[6])


def test_lanes_are_leased_once_each_the_longest_waiting_first(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    with sessions.begin() as session:
        club = make_club(session)
        made = [make_endpoint(session, club, settings)[0] for _ in range(3)]
        idle = make_endpoint(session, club, settings)[0]
        for _ in range(3):
            events.publish(session, club, "registration.created", registration(), EPOCH)
        endpoints.disable_endpoint(session, club.id, idle.id, EPOCH, off_reasons.OffReason.STAFF)
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
        connection = session.connection()
        queue.on(connection).refresh(connection, [newest.id, middle.id])
    assert _lanes(sessions, timedelta(seconds=10)) == [oldest.id]
    # The others are due later; once due, they come in the order they came due.
    assert _lanes(sessions, timedelta(seconds=40)) == [middle.id, newest.id]
    # Leased lanes are not leased again until their leases run out; the switched-off
    # endpoint has nothing waiting, so its lane is never leased.
    assert _lanes(sessions, timedelta(seconds=41), token=OTHER) == []
    assert _lanes(sessions, timedelta(seconds=101), token=OTHER) == [
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
    retry = judge(first, False, EPOCH, SCHEDULE, 0.5)
    results = [
        Result(first, EPOCH, False, 503, None, 1234, awkward, retry),
        Result(second, EPOCH, False, None, "tls: host name mismatch", 7, "", retry),
    ]
    with sessions.begin() as session:
        records.record(session, results, EPOCH)
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
            d.id: (d.status, d.attempt, d.response_code, d.next_attempt_at)
            for d in session.scalars(select(Delivery))
        }
    assert stored == {
        first.delivery_id: (1, "scheduled", EPOCH, 1234, 503, None, awkward),
        second.delivery_id: (1, "scheduled", EPOCH, 7, None, "tls: host name mismatch", ""),
    }
    assert moved == {
        first.delivery_id: ("pending", 1, 503, retry.next_attempt_at),
        second.delivery_id: ("pending", 1, None, retry.next_attempt_at),
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
    tested = _endpoint(sessions, endpoint_id)
    assert (tested.last_delivery_at, tested.last_response_code) == (None, None)


def test_a_test_send_leaves_last_delivery_as_the_last_real_one(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _world(sessions, settings)
    real = _claim(sessions)
    with sessions.begin() as session:
        test = claims.create_test_job(
            session, session.get_one(Club, club_id), endpoint_id, EPOCH, LEASE
        )
    _record(sessions, [*real, test], ok=True, code=201)  # one batch, the test recorded last
    with sessions.begin() as session:
        again = claims.create_test_job(
            session, session.get_one(Club, club_id), endpoint_id, EPOCH, LEASE
        )
    _record(sessions, [again], ok=False, at=timedelta(minutes=5))
    endpoint = _endpoint(sessions, endpoint_id)
    assert (endpoint.last_delivery_at, endpoint.last_response_code) == (EPOCH, 201)
    assert endpoint.dead_in_a_row == 0


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


def test_recording_finds_its_rows_by_key_even_after_an_analyse_of_an_empty_table(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """As after retention pruned everything: the statistics say the deliveries are none,
    while thousands are there. Each record statement still reaches the batch's rows through
    the primary key, never by reading the whole table."""
    if settings.is_sqlite:
        pytest.skip("clubwire runs no ANALYZE on SQLite; its planner keeps no such statistics")
    with sessions.begin() as session:
        session.execute(text("ANALYZE deliveries"))
    _world(sessions, settings, count=3)
    with sessions.begin() as session:
        session.execute(text(_MANY_DELIVERIES))
    jobs = _claim(sessions)
    now = EPOCH
    results = [
        Result(job, now, True, 200, None, 12, "ok", judge(job, True, now, SCHEDULE, 0.5))
        for job in jobs
    ]
    postgresql = queue.of("postgresql")
    with sessions() as session:
        connection = session.connection()
        values = {"results": rows.batch(results, connection.dialect), "ids": rows.ids(results)}
        scanned = [
            _tables_read_whole(
                connection.execute(
                    text(f"EXPLAIN (FORMAT JSON) {statement.text}"), {**values, "now": now}
                ).scalar_one()
            )
            for statement in (postgresql._insert_attempts, postgresql._move)
        ]
    assert len(jobs) == 3
    assert scanned == [set(), set()]


def test_a_claim_reaches_each_delivery_by_key_whatever_the_planner_guesses(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """PostgreSQL guesses a hundred lanes of unknown counts in the claim's document, so
    thousands of rows: each lane's entries still reach their deliveries and events through
    the primary keys, never by reading those tables whole (as a hash join would)."""
    if settings.is_sqlite:
        pytest.skip("SQLite's claim reads one lane per statement, by the endpoint's index")
    _, endpoint_id = _world(sessions, settings)
    with sessions.begin() as session:
        for statement in _MANY_DUE:
            session.execute(text(statement))
        session.execute(text("ANALYZE"))
    want = {"endpoint_id": endpoint_id, "count": 32, "after_due": START[0], "after_id": ""}
    document = rows.document([{**want, "held": []}])
    explain = text(f"EXPLAIN (FORMAT JSON) {postgres._JOBS.text}")
    with sessions() as session:
        plan = session.execute(explain, {"wants": document, "now": EPOCH}).scalar_one()
    assert _claim(sessions) != []
    assert _tables_read_whole(plan) == set()


# Thousands of events, each with a delivery due to the same endpoint, in two statements.
_MANY_DUE = (
    """
    INSERT INTO events (id, club_id, kind, body, created_at)
    SELECT 'evt_many_' || n, e.club_id, e.kind, e.body, e.created_at
    FROM generate_series(1, 3000) AS n, (SELECT * FROM events LIMIT 1) AS e
    """,
    """
    INSERT INTO deliveries (id, club_id, event_id, endpoint_id, status, attempt,
        next_attempt_at, next_trigger, created_at, updated_at)
    SELECT 'dlv_many_' || n, d.club_id, 'evt_many_' || n, d.endpoint_id, 'pending', 0,
        d.next_attempt_at, 'scheduled', d.created_at, d.updated_at
    FROM generate_series(1, 3000) AS n, (SELECT * FROM deliveries LIMIT 1) AS d
    """,
)


def test_recording_an_attempt_updates_its_delivery_in_place_on_postgresql(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """No index of the deliveries holds a column a record changes (the queue's order is in
    ``queue_entries``), so each delivery's new version stays on its page with no new index
    entries: a HOT update, counted in the transaction's own statistics."""
    if settings.is_sqlite:
        pytest.skip("SQLite has no HOT updates: it rewrites only the indexes that change")
    _world(sessions, settings, count=4)
    jobs = _claim(sessions)
    now = EPOCH
    results = [
        Result(job, now, ok, 200 if ok else 503, None, 12, "", judge(job, ok, now, SCHEDULE, 0.5))
        for job, ok in zip(jobs, [True, True, False, False], strict=True)
    ]
    with sessions.begin() as session:
        records.record(session, results, now)
        updated, hot = session.execute(
            text(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables"
                " WHERE relname = 'deliveries'"
            )
        ).one()
    assert (updated, hot) == (4, 4)


# Thousands of finished deliveries beside the due ones, behind the statistics' back.
_MANY_DELIVERIES = """
    INSERT INTO deliveries (id, club_id, event_id, endpoint_id, status, attempt,
        next_trigger, created_at, updated_at)
    SELECT 'dlv_many_' || n, d.club_id, d.event_id, d.endpoint_id, 'succeeded', 1,
        'scheduled', d.created_at, d.updated_at
    FROM generate_series(1, 5000) AS n, (SELECT * FROM deliveries LIMIT 1) AS d
"""


def _tables_read_whole(plan: object) -> set[str]:
    """The relations a JSON plan reads with a sequential scan."""
    if isinstance(plan, list):
        return set().union(*(_tables_read_whole(item) for item in plan))
    if not isinstance(plan, dict):
        return set()
    found = {plan["Relation Name"]} if plan.get("Node Type") == "Seq Scan" else set()
    return found.union(*(_tables_read_whole(value) for value in plan.values()))


def test_a_claimed_job_and_a_test_carry_the_endpoints_headers_sealed(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club_id, endpoint_id = _world(sessions, settings)
    own = [Header("X-Api-Key", "k3y")]
    with sessions.begin() as session:
        endpoints.update_endpoint(session, club_id, endpoint_id, EPOCH, settings, headers=own)
        sealed = session.get_one(Endpoint, endpoint_id).headers_sealed
        club = session.get_one(Club, club_id)
        test = claims.create_test_job(session, club, endpoint_id, EPOCH, LEASE)
    [job] = _claim(sessions)
    assert sealed is not None
    assert job.headers_sealed == test.headers_sealed == sealed
