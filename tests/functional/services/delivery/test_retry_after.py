"""A receiver's ``Retry-After`` end to end (DESIGN §6, "Receivers steer"; issue 33, item 1): a
real TLS receiver answers, the real outbound client reads it, the attempt is judged at its end
by a clock that stands still, and it is recorded on each database. What the receiver asked
moves the next attempt only when it is later than the schedule's step, and never beyond
``CLUBWIRE_RETRY_AFTER_MAX``; every value is kept as it came."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Status
from clubwire.domain.off_reasons import OffReason
from clubwire.services import endpoints
from clubwire.services.delivery import deliveries, events
from clubwire.settings import Settings
from clubwire.storage.models import Attempt, Delivery
from tests.factories import EPOCH, make_club, receiver_settings, registration
from tests.functional.workers import attempt_once
from tests.receiver import Authority, Receiver, serving

STEP = timedelta(seconds=60)  # the schedule's first step; its spread reaches 66 seconds
HOUR_LATER = EPOCH + timedelta(hours=1)  # EPOCH is Monday 5 January 2026, 12:00 UTC


@dataclass(frozen=True)
class Recorded:
    """A delivery after its attempt was recorded, and that attempt."""

    status: str
    next_attempt_at: datetime | None
    asked: bool
    retry_after: str | None


@pytest.fixture
def hooks(settings: Settings, tls: Authority) -> Settings:
    return receiver_settings(settings, ca_bundle=tls.bundle, attempt_timeout=5.0)


def _attempted(
    sessions: sessionmaker[Session],
    hooks: Settings,
    receiver: Receiver,
    *,
    attempts_made: int = 0,
) -> Recorded:
    """One delivery to ``receiver``, which has had ``attempts_made`` attempts, attempted once
    more at ``EPOCH`` and recorded."""
    with sessions.begin() as session:
        club = make_club(session)
        endpoints.create_endpoint(
            session, club, receiver.url, ["registration.created"], EPOCH, hooks
        )
        events.publish(session, club, "registration.created", registration(), EPOCH)
        session.execute(update(Delivery).values(attempt=attempts_made))
    attempt_once(sessions, hooks, EPOCH)
    return _recorded(sessions)


def _recorded(sessions: sessionmaker[Session]) -> Recorded:
    with sessions() as session:
        delivery = session.scalars(select(Delivery)).one()
        attempt = session.scalars(select(Attempt).order_by(Attempt.id.desc())).first()
        assert attempt is not None
        return Recorded(
            delivery.status,
            delivery.next_attempt_at,
            delivery.next_attempt_asked,
            attempt.retry_after,
        )


def _on_schedule(recorded: Recorded) -> bool:
    """Whether the next attempt is at the schedule's first step, within its spread."""
    due = recorded.next_attempt_at
    return due is not None and EPOCH + STEP <= due <= EPOCH + STEP * 1.1 and not recorded.asked


@pytest.mark.parametrize(
    ("value", "until"),
    [
        ("120", EPOCH + timedelta(seconds=120)),
        ("3600", HOUR_LATER),
        ("Mon, 05 Jan 2026 13:00:00 GMT", HOUR_LATER),
        ("Monday, 05-Jan-26 13:00:00 GMT", HOUR_LATER),
        ("Mon Jan  5 13:00:00 2026", HOUR_LATER),
    ],
)
@pytest.mark.parametrize("status", [429, 503, 502, 504])
def test_a_later_ask_moves_the_next_attempt_to_it(
    sessions: sessionmaker[Session],
    hooks: Settings,
    tls: Authority,
    status: int,
    value: str,
    until: datetime,
) -> None:
    with serving(tls, status=status, answer_headers=[("Retry-After", value)]) as receiver:
        recorded = _attempted(sessions, hooks, receiver)
    assert recorded == Recorded(Status.PENDING, until, True, value)


@pytest.mark.parametrize(
    "value",
    [
        "-120",
        "",
        "soon",
        "12.5",
        "120, 60",
        "120,",
        "١٢٠",
        "Mon, 05 Jan 2026 11:00:00 GMT",  # past
        "Mon, 05 Jan 2026 12:00:00 GMT",  # now
        "Mon, 30 Feb 2026 13:00:00 GMT",  # no such day
        "1000000000000",  # 10^12 seconds
        "30",  # sooner than the step: the step stands
    ],
)
def test_an_ask_that_is_not_valid_or_not_later_keeps_to_the_schedule_and_is_kept(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority, value: str
) -> None:
    with serving(tls, status=503, answer_headers=[("Retry-After", value)]) as receiver:
        recorded = _attempted(sessions, hooks, receiver)
    assert _on_schedule(recorded)
    assert recorded.retry_after == value


def test_several_headers_keep_to_the_schedule_and_are_kept_joined(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    given = [("Retry-After", "120"), ("Retry-After", "3600")]
    with serving(tls, status=503, answer_headers=given) as receiver:
        recorded = _attempted(sessions, hooks, receiver)
    assert _on_schedule(recorded)
    assert recorded.retry_after == "120, 3600"


@pytest.mark.parametrize("value", ["86400", "Tue, 06 Jan 2026 13:00:00 GMT"])
def test_an_ask_beyond_the_most_is_cut_to_it(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority, value: str
) -> None:
    capped = hooks.model_copy(update={"retry_after_max": 7200})
    with serving(tls, status=429, answer_headers=[("Retry-After", value)]) as receiver:
        recorded = _attempted(sessions, capped, receiver)
    assert recorded == Recorded(Status.PENDING, EPOCH + timedelta(hours=2), True, value)


@pytest.mark.parametrize("status", [500, 400, 302])
def test_other_answers_keep_to_the_schedule_whatever_they_ask(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority, status: int
) -> None:
    with serving(tls, status=status, answer_headers=[("Retry-After", "3600")]) as receiver:
        recorded = _attempted(sessions, hooks, receiver)
    assert _on_schedule(recorded)
    assert recorded.retry_after == "3600"


def test_the_sixth_failed_attempt_is_dead_whatever_the_receiver_asked(
    sessions: sessionmaker[Session], hooks: Settings, tls: Authority
) -> None:
    with serving(tls, status=503, answer_headers=[("Retry-After", "120")]) as receiver:
        recorded = _attempted(sessions, hooks, receiver, attempts_made=5)
    assert recorded == Recorded(Status.DEAD, None, False, "120")


def test_an_answer_without_one_records_none(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    receiver.status = 503
    recorded = _attempted(sessions, hooks, receiver)
    assert _on_schedule(recorded)
    assert recorded.retry_after is None


# -- what else sets the next attempt says it is not the receiver's ------------------------------


@pytest.fixture
def asked(sessions: sessionmaker[Session], hooks: Settings, tls: Authority) -> Recorded:
    """A delivery whose receiver asked it to wait an hour."""
    with serving(tls, status=503, answer_headers=[("Retry-After", "3600")]) as receiver:
        return _attempted(sessions, hooks, receiver)


def test_retry_brings_an_asked_attempt_forward_as_staff_asked(
    sessions: sessionmaker[Session], asked: Recorded
) -> None:
    assert asked.asked
    with sessions.begin() as session:
        delivery = session.scalars(select(Delivery)).one()
        deliveries.retry(session, delivery.club_id, delivery.id, EPOCH + STEP)
    recorded = _recorded(sessions)
    assert (recorded.next_attempt_at, recorded.asked) == (EPOCH + STEP, False)


def test_switching_the_endpoint_off_skips_it_and_the_ask_with_it(
    sessions: sessionmaker[Session], asked: Recorded
) -> None:
    assert asked.asked
    with sessions.begin() as session:
        delivery = session.scalars(select(Delivery)).one()
        endpoints.disable_endpoint(
            session, delivery.club_id, delivery.endpoint_id, EPOCH, OffReason.STAFF
        )
    recorded = _recorded(sessions)
    assert (recorded.status, recorded.next_attempt_at, recorded.asked) == (
        Status.SKIPPED,
        None,
        False,
    )
