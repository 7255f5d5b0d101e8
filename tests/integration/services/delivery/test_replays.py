"""Replay (issue 14, item 1) on both databases: the window, the filters, the limit, a replay
submitted twice (at once, on PostgreSQL from two threads), and an endpoint or module off."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import event_catalog, off_reasons, replay_window
from clubwire.domain.delivering import Status, Trigger
from clubwire.domain.replay_window import Replay, Window
from clubwire.services import clubs, endpoints
from clubwire.services.delivery import replays
from clubwire.settings import Settings
from clubwire.storage.models import Club, Delivery, Endpoint, QueueHead
from tests.factories import EPOCH, make_club, make_delivery, make_endpoint

KINDS = ("registration.created", "payment.completed")
NOW = EPOCH + timedelta(days=1)


@pytest.fixture
def setup(session: Session, settings: Settings) -> tuple[Club, Endpoint]:
    club = make_club(session)
    endpoint, _ = make_endpoint(session, club, settings, kinds=KINDS)
    session.commit()
    return club, endpoint


def _at(hour: int, minute: int = 0) -> datetime:
    return EPOCH.replace(hour=hour, minute=minute)


def _window(
    since: str = "2026-01-05T12:00Z",
    until: str = "2026-01-05T13:00Z",
    statuses: tuple[str, ...] = (),
    kinds: tuple[str, ...] = (),
) -> Window:
    return replay_window.window(since, until, statuses, kinds)


def _replayed(session: Session) -> set[str]:
    query = select(Delivery.id).where(Delivery.next_attempt_at == NOW)
    return set(session.scalars(query))


def test_the_window_is_half_open_and_only_dead_and_skipped_by_default(
    session: Session, setup: tuple[Club, Endpoint]
) -> None:
    club, endpoint = setup
    make_delivery(session, club, endpoint, _at(11, 59))
    inside = {
        make_delivery(session, club, endpoint, _at(12)),
        make_delivery(session, club, endpoint, _at(12, 59), Status.SKIPPED),
    }
    make_delivery(session, club, endpoint, _at(12, 30), Status.SUCCEEDED)
    make_delivery(session, club, endpoint, _at(12, 30), Status.PENDING)
    make_delivery(session, club, endpoint, _at(13))
    session.commit()

    window = _window()
    assert replays.preview(session, club.id, endpoint.id, window, 100) == Replay(2, 2)
    assert replays.replay(session, club.id, endpoint.id, window, NOW, 100).count == 2
    session.commit()
    assert _replayed(session) == inside


def test_a_replay_is_a_manual_attempt_of_the_same_delivery_and_wakes_the_queue(
    session: Session, setup: tuple[Club, Endpoint]
) -> None:
    club, endpoint = setup
    delivery_id = make_delivery(session, club, endpoint, _at(12, 5))
    session.commit()
    assert session.get_one(QueueHead, endpoint.id).next_due_at is None

    replays.replay(session, club.id, endpoint.id, _window(), NOW, 100)
    session.commit()
    session.expire_all()
    delivery = session.get_one(Delivery, delivery_id)
    assert (delivery.status, delivery.next_trigger) == (Status.DEAD, Trigger.MANUAL)
    assert delivery.next_attempt_at == NOW
    assert session.get_one(QueueHead, endpoint.id).next_due_at == NOW


def test_statuses_and_kinds_choose(session: Session, setup: tuple[Club, Endpoint]) -> None:
    club, endpoint = setup
    succeeded = make_delivery(session, club, endpoint, _at(12, 1), Status.SUCCEEDED)
    payment = make_delivery(session, club, endpoint, _at(12, 2), kind="payment.completed")
    make_delivery(session, club, endpoint, _at(12, 3))
    make_delivery(session, club, endpoint, _at(12, 4), kind=event_catalog.PING)
    session.commit()

    only_succeeded = _window(statuses=("succeeded",))
    assert replays.preview(session, club.id, endpoint.id, only_succeeded, 100).count == 1
    payments = _window(statuses=("dead", "succeeded"), kinds=("payment.completed",))
    replays.replay(session, club.id, endpoint.id, payments, NOW, 100)
    session.commit()
    assert _replayed(session) == {payment}
    everything = _window(statuses=("dead", "skipped", "succeeded"))
    assert replays.replay(session, club.id, endpoint.id, everything, NOW, 100).count == 2
    session.commit()
    assert succeeded in _replayed(session)  # and never the Send test's ping


def test_the_limit_takes_the_oldest_and_says_how_many_are_left(
    session: Session, setup: tuple[Club, Endpoint]
) -> None:
    club, endpoint = setup
    made = [make_delivery(session, club, endpoint, _at(12, minute)) for minute in (9, 1, 5, 7, 3)]
    session.commit()

    window = _window()
    shown = replays.preview(session, club.id, endpoint.id, window, 3)
    assert (shown.count, shown.matching, shown.capped) == (3, 5, True)
    first = replays.replay(session, club.id, endpoint.id, window, NOW, 3)
    session.commit()
    assert first == Replay(3, 5)
    assert _replayed(session) == {made[1], made[4], made[2]}  # 12:01, 12:03, 12:05
    assert replays.replay(session, club.id, endpoint.id, window, NOW, 3) == Replay(2, 2)
    assert replays.replay(session, club.id, endpoint.id, window, NOW, 3) == Replay(0, 0)


def test_a_second_submission_finds_nothing_left(
    sessions: sessionmaker[Session], session: Session, setup: tuple[Club, Endpoint]
) -> None:
    club, endpoint = setup
    for minute in range(10):
        make_delivery(session, club, endpoint, _at(12, minute))
    session.commit()
    with sessions.begin() as first:
        assert replays.replay(first, club.id, endpoint.id, _window(), NOW, 100).count == 10
    with sessions.begin() as second:
        assert replays.replay(second, club.id, endpoint.id, _window(), NOW, 100).count == 0


def test_two_replays_at_once_send_each_delivery_once(
    sessions: sessionmaker[Session], session: Session, setup: tuple[Club, Endpoint]
) -> None:
    """Two staff (or two processes) replay the same window at the same moment."""
    club, endpoint = setup
    made = {make_delivery(session, club, endpoint, _at(12, minute % 60)) for minute in range(60)}
    session.commit()
    barrier = threading.Barrier(2)
    counts: list[int] = []
    failures: list[BaseException] = []

    def submit(limit: int) -> None:
        try:
            with sessions.begin() as own:
                barrier.wait(timeout=10)
                counts.append(
                    replays.replay(own, club.id, endpoint.id, _window(), NOW, limit).count
                )
        except BaseException as exc:  # failed in the main thread, below
            failures.append(exc)

    threads = [threading.Thread(target=submit, args=(limit,)) for limit in (100, 45)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not failures, failures
    assert sum(counts) == 60
    session.expire_all()
    assert _replayed(session) == made


@pytest.mark.parametrize("what", ["endpoint", "module"])
def test_nothing_is_replayed_while_off(
    session: Session, setup: tuple[Club, Endpoint], what: str
) -> None:
    club, endpoint = setup
    make_delivery(session, club, endpoint, _at(12, 1))
    if what == "endpoint":
        endpoints.disable_endpoint(
            session, club.id, endpoint.id, EPOCH, off_reasons.OffReason.STAFF
        )
    else:
        clubs.set_webhooks_module(session, club.slug, False, EPOCH)
    session.commit()
    with pytest.raises(errors.Conflict, match=r"switch it on|are off"):
        replays.preview(session, club.id, endpoint.id, _window(), 100)
    with pytest.raises(errors.Conflict, match=r"switch it on|are off"):
        replays.replay(session, club.id, endpoint.id, _window(), NOW, 100)
    session.rollback()
    assert _replayed(session) == set()


def test_another_clubs_endpoint_is_not_found(
    session: Session, settings: Settings, setup: tuple[Club, Endpoint]
) -> None:
    _, endpoint = setup
    other = make_club(session, "pebble")
    with pytest.raises(errors.NotFound):
        replays.replay(session, other.id, endpoint.id, _window(), NOW, 100)


def test_a_replay_rolled_back_leaves_nothing_due(
    session: Session, setup: tuple[Club, Endpoint]
) -> None:
    """The deliveries and their queue head move in the caller's one transaction."""
    club, endpoint = setup
    make_delivery(session, club, endpoint, _at(12, 1))
    session.commit()
    assert replays.replay(session, club.id, endpoint.id, _window(), NOW, 100).count == 1
    session.rollback()
    assert _replayed(session) == set()
    assert session.get_one(QueueHead, endpoint.id).next_due_at is None
