"""Publishing a batch: each event as ``publish`` makes it, in the caller's transaction, so a
refused event (named by its place) leaves nothing of the others."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain.event_batches import BatchEvent
from clubwire.services import clubs
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Delivery, Event
from tests.factories import EPOCH, about, make_club, make_endpoint


def _item(kind: str = "registration.created", seed: int = 0, key: str | None = None) -> BatchEvent:
    return BatchEvent(event=kind, data=about(kind, seed), idempotency_key=key)


def test_each_event_is_published_in_order_to_its_subscribers(
    session: Session, settings: Settings
) -> None:
    club = make_club(session)
    registrations, _ = make_endpoint(session, club, settings, kinds=("registration.created",))
    both, _ = make_endpoint(
        session, club, settings, kinds=("registration.created", "member.updated")
    )
    batch = [_item(), _item("member.updated"), _item(seed=1)]
    published = events.publish_batch(session, club, batch, EPOCH)
    assert [(event.kind, created) for event, created in published] == [
        (item.event, True) for item in batch
    ]
    found = session.execute(select(Delivery.event_id, Delivery.endpoint_id)).all()
    ids = [event.id for event, _ in published]
    subscribed = [(registrations.id, both.id), (both.id,), (registrations.id, both.id)]
    expected = [(i, endpoint) for i, to in zip(ids, subscribed, strict=True) for endpoint in to]
    assert sorted(found) == sorted(expected)


def test_a_key_twice_is_the_first_event_twice(session: Session, settings: Settings) -> None:
    club = make_club(session)
    make_endpoint(session, club, settings)
    (first, made), (again, made_again) = events.publish_batch(
        session, club, [_item(key="k-1"), _item(key="k-1")], EPOCH
    )
    assert (again.id, made, made_again) == (first.id, True, False)
    assert session.scalar(select(func.count()).select_from(Delivery)) == 1


@pytest.mark.parametrize(
    ("refused", "error"),
    [
        (BatchEvent(event="ping", data={}), errors.InvalidInput),
        (BatchEvent(event="registration.created", data={}), errors.InvalidInput),
        (_item(seed=5, key="k-1"), errors.IdempotencyKeyReused),
    ],
)
def test_a_refused_event_is_named_and_leaves_nothing(
    sessions: sessionmaker[Session],
    settings: Settings,
    refused: BatchEvent,
    error: type[errors.ClubwireError],
) -> None:
    with sessions.begin() as session:
        club = make_club(session)
        make_endpoint(session, club, settings)
    batch = [_item(key="k-1"), _item(seed=2), refused]
    with pytest.raises(error) as raised, sessions.begin() as session:
        events.publish_batch(session, clubs.get_club(session, "granite"), batch, EPOCH)
    assert raised.value.item == 2
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0
        assert session.scalar(select(func.count()).select_from(Delivery)) == 0
