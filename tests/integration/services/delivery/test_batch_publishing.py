"""Publishing a batch: each event as ``publish`` makes it, in the caller's transaction, so a
refused event (named by its place) leaves nothing of the others."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import event_catalog
from clubwire.domain.event_batches import BatchEvent
from clubwire.services import clubs, endpoints
from clubwire.services.delivery import batches, events
from clubwire.settings import Settings
from clubwire.storage.models import Delivery, Event, OrderedLine
from tests.factories import EPOCH, about, make_club, make_endpoint, receiver_settings


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
    published = batches.publish_batch(session, club.id, batch, EPOCH)
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
    (first, made), (again, made_again) = batches.publish_batch(
        session, club.id, [_item(key="k-1"), _item(key="k-1")], EPOCH
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
        batches.publish_batch(session, clubs.get_club(session, "granite").id, batch, EPOCH)
    assert raised.value.item == 2
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0
        assert session.scalar(select(func.count()).select_from(Delivery)) == 0


def _game(game_id: str, seed: int) -> BatchEvent:
    data: dict[str, Any] = event_catalog.sample("game.updated", EPOCH, random.Random(seed))
    data["game"] = {**data["game"], "id": game_id}
    return BatchEvent(event="game.updated", data=data)


def test_a_batch_gives_each_resource_the_next_places_in_order(
    session: Session, settings: Settings
) -> None:
    """Places continue a key's earlier events and follow the batch's order, one key's
    events apart from another's."""
    club = make_club(session)
    make_endpoint(session, club, settings, kinds=("game.updated",))
    events.publish(session, club, "game.updated", _game("g1", 0).data, EPOCH)
    batch = [_game("g1", 1), _game("g2", 2), _game("g1", 3), _game("g2", 4)]
    published = batches.publish_batch(session, club.id, batch, EPOCH)
    places = [(event.ordering_key, event.sequence) for event, _ in published]
    assert places == [("game:g1", 2), ("game:g2", 1), ("game:g1", 3), ("game:g2", 2)]
    bodies = [orjson.loads(event.body) for event, _ in published]
    assert [(b["orderingKey"], b["sequence"]) for b in bodies] == places


def test_at_an_ordered_endpoint_a_batch_lines_up_its_resource_s_events(
    session: Session, settings: Settings
) -> None:
    """The first of a key's events in the batch is due, the next waits behind it; at an
    endpoint not in order both are due."""
    club = make_club(session)
    kinds = ("game.updated",)
    in_order, _ = endpoints.create_endpoint(
        session,
        club,
        "https://127.0.0.1:9/a",
        kinds,
        EPOCH,
        receiver_settings(settings),
        ordered=True,
    )
    loose, _ = make_endpoint(session, club, settings, kinds=kinds)
    first, second = batches.publish_batch(session, club.id, [_game("g1", 1), _game("g1", 2)], EPOCH)
    due = session.execute(
        select(Delivery.event_id, Delivery.endpoint_id, Delivery.next_attempt_at)
    ).all()
    assert sorted((e, p, at is not None) for e, p, at in due) == sorted(
        [
            (first[0].id, in_order.id, True),
            (second[0].id, in_order.id, False),
            (first[0].id, loose.id, True),
            (second[0].id, loose.id, True),
        ]
    )
    lined = session.scalars(select(OrderedLine.delivery_id).order_by(OrderedLine.sequence)).all()
    assert len(lined) == 2
