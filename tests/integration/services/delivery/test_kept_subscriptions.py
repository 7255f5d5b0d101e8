"""A publish takes a club's switch and its endpoints' subscriptions from memory, right as of
its own first write (issue 38 item 2, ``subscriptions``): a change committed before it
began, by this process's services or by anything else (another process, an operator's
SQL, here another engine's connection, which no notice tells of), is seen by it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, event, select, text
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.event_batches import BatchEvent
from clubwire.domain.off_reasons import OffReason
from clubwire.services import clubs, endpoints
from clubwire.services.delivery import batches, events, subscriptions
from clubwire.settings import Settings
from clubwire.storage import database
from clubwire.storage.models import Delivery
from tests.factories import EPOCH, make_club, make_endpoint, receiver_settings, registration

KIND = "registration.created"
OFF = OffReason.STAFF


@pytest.fixture
def elsewhere(settings: Settings) -> Iterator[Engine]:
    """Another engine on the same database: its changes reach this one by commit only."""
    engine = database.engine_for(settings)
    yield engine
    engine.dispose()


def _publish(sessions: sessionmaker[Session], slug: str) -> list[str]:
    """Publish as the internal API does; the endpoints given a delivery due (those given
    one skipped, as ``<id> skipped``)."""
    with sessions.begin() as session:
        club_id = subscriptions.club_id(session, slug)
        published, _ = events.publish_to(session, club_id, KIND, registration(), EPOCH)
        query = select(Delivery.endpoint_id, Delivery.status)
        made = session.execute(query.where(Delivery.event_id == published.id)).all()
    return sorted(e if status == "pending" else f"{e} {status}" for e, status in made)


@pytest.fixture
def club(sessions: sessionmaker[Session], settings: Settings) -> tuple[str, str, str]:
    """A club with two endpoints subscribed to ``KIND``; one publish made (kept since)."""
    with sessions.begin() as session:
        made = make_club(session, "granite")
        first, second = sorted(make_endpoint(session, made, settings)[0].id for _ in range(2))
        club_id = made.id
    assert _publish(sessions, "granite") == [first, second]
    return club_id, first, second


def test_a_publish_with_nothing_changed_reads_neither_club_nor_endpoints(
    engine: Engine, sessions: sessionmaker[Session], club: tuple[str, str, str]
) -> None:
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    assert _publish(sessions, "granite") == sorted(club[1:])
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert [s for s in reads if "endpoints" in s or "FROM clubs" in s] == []


@pytest.mark.parametrize(
    "change",
    [
        "DELETE FROM endpoints WHERE id = :first",
        "UPDATE endpoints SET events = 'payment.completed' WHERE id = :first",
    ],
    ids=["deleted", "unsubscribed"],
)
def test_an_endpoint_changed_elsewhere_is_seen_by_the_next_publish(
    sessions: sessionmaker[Session],
    elsewhere: Engine,
    club: tuple[str, str, str],
    change: str,
) -> None:
    _, first, second = club
    with elsewhere.begin() as connection:
        connection.execute(
            text("DELETE FROM deliveries WHERE endpoint_id = :first"), {"first": first}
        )
        connection.execute(text(change), {"first": first})
    assert _publish(sessions, "granite") == [second]


def test_a_club_switched_off_elsewhere_gets_no_delivery_from_the_next_publish(
    sessions: sessionmaker[Session], elsewhere: Engine, club: tuple[str, str, str]
) -> None:
    with elsewhere.begin() as connection:
        connection.execute(
            text("UPDATE clubs SET webhooks_enabled = false WHERE id = :id"), {"id": club[0]}
        )
    assert _publish(sessions, "granite") == []


def test_changes_through_the_services_are_seen_by_the_next_publish(
    sessions: sessionmaker[Session], settings: Settings, club: tuple[str, str, str]
) -> None:
    club_id, first, second = club
    hooks = receiver_settings(settings)
    changes: list[tuple[Callable[[Session], object], list[str]]] = [
        (
            lambda s: endpoints.update_endpoint(
                s, club_id, first, EPOCH, hooks, kinds=["payment.completed"]
            ),
            [second],
        ),
        (
            lambda s: endpoints.disable_endpoint(s, club_id, second, EPOCH, OFF),
            [f"{second} skipped"],
        ),
        (lambda s: endpoints.delete_endpoint(s, club_id, second), []),
        (lambda s: clubs.set_webhooks_module(s, "granite", False, EPOCH), []),
    ]
    for change, expected in changes:
        with sessions.begin() as session:
            change(session)
        assert _publish(sessions, "granite") == expected


def test_a_batch_sees_an_endpoint_deleted_elsewhere(
    sessions: sessionmaker[Session], elsewhere: Engine, club: tuple[str, str, str]
) -> None:
    """A batch reads the change counter once, before it writes: kept subscriptions at
    another number are read again."""
    club_id, first, second = club
    with elsewhere.begin() as connection:
        connection.execute(
            text("DELETE FROM deliveries WHERE endpoint_id = :first"), {"first": first}
        )
        connection.execute(text("DELETE FROM endpoints WHERE id = :first"), {"first": first})
    batch = [BatchEvent(event=KIND, data=registration()) for _ in range(2)]
    with sessions.begin() as session:
        published = batches.publish_batch(session, club_id, batch, EPOCH)
        made = session.scalars(
            select(Delivery.endpoint_id).where(
                Delivery.event_id.in_([found.id for found, _ in published])
            )
        ).all()
    assert made == [second, second]
