"""Payload expiry (issue 34, item 2) on SQLite and PostgreSQL: exactly the events older than
their club's payload days, with no delivery still due, lose their body, their persons'
digests and their receivers' answers, in batches; statuses, codes and times stay; Retry,
Replay and resending skipped deliveries then leave them alone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from sqlalchemy import Engine, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import replay_window
from clubwire.domain.delivering import Status, Trigger
from clubwire.domain.off_reasons import OffReason
from clubwire.services import endpoints
from clubwire.services.delivery import deliveries, replays
from clubwire.services.personal_data import expiry
from clubwire.settings import Settings
from clubwire.storage.models import Attempt, Club, Delivery, Endpoint, Event, EventPerson
from tests.factories import EPOCH, make_club, make_delivery, make_endpoint

RETENTION = timedelta(days=30)
OLD = EPOCH - timedelta(days=10)
YOUNG = EPOCH - timedelta(days=3)
ANSWER = "Thanks, Jo Bloggs <jo@example.org>"


@dataclass(frozen=True)
class Seeded:
    expire: set[str]  # delivery ids whose event's payload must expire
    stay: set[str]  # delivery ids whose event's payload must stay whole


def _club(session: Session, settings: Settings, slug: str, days: int | None) -> Endpoint:
    club = make_club(session, slug)
    club.payload_days = days
    endpoint, _ = make_endpoint(session, club, settings)
    return endpoint


def _delivery(
    session: Session, endpoint: Endpoint, created: datetime, status: Status = Status.DEAD
) -> str:
    club = session.get_one(Club, endpoint.club_id)
    delivery_id = make_delivery(session, club, endpoint, created, status)
    session.add(
        Attempt(
            delivery_id=delivery_id,
            number=1,
            trigger=Trigger.SCHEDULED,
            started_at=created,
            duration_ms=12,
            response_code=503,
            error="the receiver said 503",
            excerpt=ANSWER,
            retry_after="120",
        )
    )
    session.execute(update(Delivery).where(Delivery.id == delivery_id).values(response_code=503))
    return delivery_id


def _seed(sessions: sessionmaker[Session], settings: Settings) -> Seeded:
    with sessions.begin() as session:
        granite = _club(session, settings, "granite", 7)
        expire = {_delivery(session, granite, OLD - timedelta(hours=n)) for n in range(5)}
        expire.add(_delivery(session, granite, OLD, Status.SKIPPED))
        stay = {
            _delivery(session, granite, YOUNG),
            _delivery(session, granite, OLD, Status.PENDING),
        }
        brought_forward = _delivery(session, granite, OLD)
        session.execute(
            update(Delivery).where(Delivery.id == brought_forward).values(next_attempt_at=EPOCH)
        )
        stay.add(brought_forward)
        marble = _club(session, settings, "marble", None)  # as long as the history
        stay.add(_delivery(session, marble, OLD - timedelta(days=20)))
        pebble = _club(session, settings, "pebble", 60)  # more than the history: the history's
        expire.add(_delivery(session, pebble, EPOCH - RETENTION - timedelta(minutes=1)))
        stay.add(_delivery(session, pebble, EPOCH - RETENTION + timedelta(minutes=1)))
    return Seeded(expire, stay)


def _facts(session: Session, delivery_ids: set[str]) -> dict[str, tuple[object, ...]]:
    """What must stay of each delivery, expired or not: its status, codes, attempts, times."""
    rows = session.execute(
        select(
            Delivery.id,
            Delivery.status,
            Delivery.attempt,
            Delivery.response_code,
            Delivery.created_at,
            Attempt.number,
            Attempt.response_code,
            Attempt.error,
            Attempt.started_at,
            Attempt.duration_ms,
        )
        .join(Attempt, Attempt.delivery_id == Delivery.id)
        .where(Delivery.id.in_(delivery_ids))
    )
    return {row[0]: tuple(row[1:]) for row in rows}


def _event(session: Session, delivery_id: str) -> Event:
    event_id = session.scalars(select(Delivery.event_id).where(Delivery.id == delivery_id)).one()
    return session.get_one(Event, event_id)


def _people(session: Session, event_id: str) -> int:
    return len(session.scalars(select(EventPerson).where(EventPerson.event_id == event_id)).all())


def _answers(session: Session, delivery_id: str) -> tuple[str, str | None]:
    attempt = session.scalars(select(Attempt).where(Attempt.delivery_id == delivery_id)).one()
    return attempt.excerpt, attempt.retry_after


def test_exactly_the_expired_payloads_are_emptied_and_the_history_stays(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    seeded = _seed(sessions, settings)
    with sessions() as session:
        before = _facts(session, seeded.expire | seeded.stay)
    assert expiry.expire(sessions, EPOCH, RETENTION, batch=2) == len(seeded.expire) == 7
    with sessions() as session:
        assert _facts(session, seeded.expire | seeded.stay) == before
        for delivery_id in seeded.expire:
            event = _event(session, delivery_id)
            assert (event.body, event.payload_removed) == (b"", "expired")
            assert _people(session, event.id) == 0
            assert _answers(session, delivery_id) == ("", None)
        for delivery_id in seeded.stay:
            event = _event(session, delivery_id)
            assert event.payload_removed is None
            assert b'"member"' in event.body
            assert _people(session, event.id) == 2  # the member's id and email
            assert _answers(session, delivery_id) == (ANSWER, "120")
    assert expiry.expire(sessions, EPOCH, RETENTION) == 0


def test_it_stops_between_batches_each_one_done(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    seeded = _seed(sessions, settings)
    asked: list[bool] = []

    def keep_going() -> bool:
        asked.append(True)
        return len(asked) < 2

    assert expiry.expire(sessions, EPOCH, RETENTION, batch=2, keep_going=keep_going) == 2
    with sessions() as session:
        expired = {d for d in seeded.expire if _event(session, d).payload_removed == "expired"}
    assert len(expired) == 2
    assert expiry.expire(sessions, EPOCH, RETENTION, batch=2) == len(seeded.expire) - 2


@pytest.fixture
def expired(sessions: sessionmaker[Session], settings: Settings) -> Seeded:
    seeded = _seed(sessions, settings)
    expiry.expire(sessions, EPOCH, RETENTION)
    return seeded


def test_retry_of_an_expired_delivery_is_refused_with_the_reason(
    session: Session, expired: Seeded
) -> None:
    delivery_id = sorted(expired.expire)[0]
    club_id = session.scalars(select(Delivery.club_id).where(Delivery.id == delivery_id)).one()
    with pytest.raises(errors.Conflict, match=r"\(payload expired\)"):
        deliveries.retry(session, club_id, delivery_id, EPOCH)


def test_replay_leaves_expired_deliveries_out_and_counts_them(
    session: Session, expired: Seeded
) -> None:
    endpoint = session.scalars(
        select(Endpoint).join(Club, Club.id == Endpoint.club_id).where(Club.slug == "granite")
    ).one()
    window = replay_window.Window(EPOCH - timedelta(days=11), EPOCH)
    done = replays.replay(session, endpoint.club_id, endpoint.id, window, EPOCH, 100)
    assert (done.count, done.withheld) == (1, 6)  # the young dead one is sent again
    assert "6 deliveries of this window cannot be sent again" in done.summary(preview=False)


def test_switching_on_does_not_resend_an_expired_skipped_delivery(
    session: Session, expired: Seeded
) -> None:
    (skipped,) = session.scalars(select(Delivery).where(Delivery.status == Status.SKIPPED))
    endpoint = session.get_one(Endpoint, skipped.endpoint_id)
    # Its pending delivery is skipped now (its endpoint off), and may be sent again.
    endpoints.disable_endpoint(session, endpoint.club_id, endpoint.id, EPOCH, OffReason.STAFF)
    assert endpoints.count_skipped(session, endpoint.club_id, endpoint.id) == 1
    _, resent = endpoints.enable_endpoint(
        session, endpoint.club_id, endpoint.id, EPOCH, resend_skipped=True
    )
    assert resent == 1
    session.refresh(skipped)
    assert (skipped.status, skipped.next_attempt_at) == (Status.SKIPPED, None)


def test_an_event_another_transaction_holds_is_skipped_on_postgresql(
    sessions: sessionmaker[Session], settings: Settings, engine: Engine
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite has a single writer: nothing is held while pruning runs")
    seeded = _seed(sessions, settings)
    with sessions() as session:
        held = _event(session, sorted(seeded.expire)[0]).id
    with engine.connect() as holder:
        holder.execute(text("SELECT 1 FROM events WHERE id = :id FOR UPDATE"), {"id": held})
        assert expiry.expire(sessions, EPOCH, RETENTION) == len(seeded.expire) - 1
        holder.rollback()
    assert expiry.expire(sessions, EPOCH, RETENTION) == 1
