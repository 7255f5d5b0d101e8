"""Retention on SQLite and PostgreSQL: old finished history goes, recent and pending stays."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog
from clubwire.domain.delivering import Status, Trigger
from clubwire.domain.emails import Draft
from clubwire.services import retention
from clubwire.services.delivery import events
from clubwire.services.mail import outbox
from clubwire.settings import Settings
from clubwire.storage.models import Attempt, Club, Delivery, Event, OutboxEmail
from clubwire.worker import retention as worker_retention
from tests.factories import EPOCH, FakeClock, make_club, make_endpoint, registration
from tests.logcapture import capturing

PERIOD = timedelta(days=30)
OLD = EPOCH - timedelta(days=40)
RECENT = EPOCH - timedelta(days=1)


@dataclass(frozen=True)
class History:
    stays: set[str]  # delivery and event ids that must remain


def _publish(session: Session, club: Club, at: datetime) -> tuple[str, str]:
    event, _ = events.publish(session, club, "registration.created", registration(), at)
    delivery_id = session.scalars(select(Delivery.id).where(Delivery.event_id == event.id)).one()
    return event.id, delivery_id


def _finish(session: Session, delivery_id: str, status: Status, **values: object) -> None:
    session.execute(
        update(Delivery)
        .where(Delivery.id == delivery_id)
        .values(status=status, next_attempt_at=None, **values)
    )


def _attempts(session: Session, delivery_id: str, *started: datetime) -> None:
    for number, at in enumerate(started, 1):
        session.add(
            Attempt(
                delivery_id=delivery_id,
                number=number,
                trigger=Trigger.SCHEDULED,
                started_at=at,
                duration_ms=12,
                response_code=500,
                excerpt="",
            )
        )


def _history(sessions: sessionmaker[Session], settings: Settings, slug: str = "granite") -> History:
    """Seven events, of which three (and their deliveries) must stay; 5 old attempts."""
    with sessions.begin() as session:
        club = make_club(session, slug)
        make_endpoint(session, club, settings, kinds=("registration.created",))
        old_succeeded = _publish(session, club, OLD)
        _finish(session, old_succeeded[1], Status.SUCCEEDED)
        _attempts(session, old_succeeded[1], OLD)
        old_dead = _publish(session, club, OLD)
        _finish(session, old_dead[1], Status.DEAD)
        _attempts(session, old_dead[1], OLD, OLD, OLD, RECENT)  # the recent one: a manual try
        old_pending = _publish(session, club, OLD)
        _attempts(session, old_pending[1], OLD)
        old_retry_queued = _publish(session, club, OLD)
        _finish(session, old_retry_queued[1], Status.DEAD)
        session.execute(
            update(Delivery)
            .where(Delivery.id == old_retry_queued[1])
            .values(next_attempt_at=EPOCH, next_trigger=Trigger.MANUAL)
        )
        old_skipped = _publish(session, club, OLD)
        _finish(session, old_skipped[1], Status.SKIPPED)
        recent = _publish(session, club, RECENT)
        _finish(session, recent[1], Status.SUCCEEDED)
        _attempts(session, recent[1], RECENT)
        ping = event_catalog.validate("ping", {"message": "hi"})
        events.record_event(session, club, "ping", ping, OLD)  # no delivery at all
        _emails(session, club)
    return History(stays={*old_pending, *old_retry_queued, *recent})


def _emails(session: Session, club: Club) -> None:
    """Three emails of the outbox: old and sent (goes), old and still due, recent and sent."""
    draft = Draft(subject="An endpoint is failing", body="…")
    for at, sent in ((OLD, True), (OLD, False), (RECENT, True)):
        recipient = f"{at.day}-{sent}@{club.slug}.example"
        outbox.enqueue(session, club.id, [recipient], draft, at)
        if sent:
            session.execute(
                update(OutboxEmail)
                .where(OutboxEmail.recipient == recipient)
                .values(next_attempt_at=None, sent_at=at)
            )


def _left(sessions: sessionmaker[Session]) -> tuple[set[str], int]:
    with sessions() as session:
        kept = set(session.scalars(select(Event.id))) | set(session.scalars(select(Delivery.id)))
        return kept, session.scalar(select(func.count()).select_from(Attempt)) or 0


def test_old_finished_history_goes_recent_and_pending_stay(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    history = _history(sessions, settings)
    pruned = retention.prune(sessions, EPOCH, PERIOD, batch=2)
    assert pruned == retention.Pruned(attempts=5, deliveries=3, events=4, emails=1)
    kept, attempts = _left(sessions)
    assert kept == history.stays
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(OutboxEmail)) == 2
    assert attempts == 1  # the recent delivery's; the dead one's recent try went with it
    assert retention.prune(sessions, EPOCH, PERIOD) == retention.Pruned()


def test_nothing_goes_within_the_period(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _history(sessions, settings)
    assert retention.prune(sessions, EPOCH, timedelta(days=50)) == retention.Pruned()


def test_prunes_running_at_once_share_the_work(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    for slug in ("granite", "marble", "pebble", "hack"):
        _history(sessions, settings, slug)
    results: list[retention.Pruned] = []
    start = threading.Barrier(2)

    def prune() -> None:
        start.wait()
        results.append(retention.prune(sessions, EPOCH, PERIOD, batch=3))

    threads = [threading.Thread(target=prune) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2
    assert sum(r.deliveries for r in results) == 4 * 3
    assert sum(r.events for r in results) == 4 * 4
    assert sum(r.emails for r in results) == 4
    assert retention.prune(sessions, EPOCH, PERIOD) == retention.Pruned()


def test_the_worker_prunes_soon_after_it_starts_and_says_what(
    sessions: sessionmaker[Session], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = _history(sessions, settings)

    async def run() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(
            worker_retention.keep_pruning(settings, sessions, FakeClock(), stop, first_after=0)
        )
        for _ in range(500):
            if await asyncio.to_thread(_left, sessions) == (history.stays, 1):
                break
            await asyncio.sleep(0.01)
        stop.set()
        await task

    with capturing(monkeypatch) as captured:
        asyncio.run(run())
    (line,) = captured.events("pruned")
    assert {k: line[k] for k in ("attempts", "deliveries", "events", "retention_days")} == {
        "attempts": 5,
        "deliveries": 3,
        "events": 4,
        "retention_days": 30,
    }
