"""Publishing: the outbox, fan-out, idempotency, the module switch, invalid data."""

from __future__ import annotations

import orjson
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from clubwire import errors
from clubwire.domain import event_catalog, off_reasons
from clubwire.services import clubs, endpoints
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Delivery, Event
from tests.factories import EPOCH, make_club, make_endpoint, registration


def _deliveries(session: Session) -> list[Delivery]:
    return list(session.scalars(select(Delivery).order_by(Delivery.endpoint_id)))


def test_publish_fans_out_to_subscribed_endpoints_only(
    session: Session, settings: Settings
) -> None:
    club = make_club(session)
    a, _ = make_endpoint(session, club, settings, kinds=("registration.created",))
    b, _ = make_endpoint(session, club, settings, kinds=("registration.created", "member.updated"))
    make_endpoint(session, club, settings, kinds=("member.updated",))
    event, created = events.publish(session, club, "registration.created", registration(), EPOCH)
    assert created
    assert event.id.startswith("evt_")
    assert sorted(d.endpoint_id for d in _deliveries(session)) == sorted([a.id, b.id])
    assert {(d.status, d.attempt, d.next_attempt_at) for d in _deliveries(session)} == {
        ("pending", 0, EPOCH)
    }


def test_the_envelope_is_stored_once_as_exact_bytes(session: Session, settings: Settings) -> None:
    club = make_club(session)
    event, _ = events.publish(session, club, "registration.created", registration(), EPOCH)
    envelope = orjson.loads(event.body)
    assert list(envelope) == [
        "id",
        "event",
        "createdAt",
        "organizationId",
        "orderingKey",
        "sequence",
        "data",
    ]
    assert envelope["id"] == event.id
    assert (envelope["orderingKey"], envelope["sequence"]) == (event.ordering_key, 1)
    assert envelope["event"] == "registration.created"
    assert envelope["createdAt"] == "2026-01-05T12:00:00.000Z"
    assert envelope["organizationId"] == club.id
    assert envelope["data"]["member"]["email"] == registration()["member"]["email"]


def test_a_disabled_endpoint_gets_its_delivery_as_skipped(
    session: Session, settings: Settings
) -> None:
    club = make_club(session)
    endpoint, _ = make_endpoint(session, club, settings)
    endpoints.disable_endpoint(session, club.id, endpoint.id, EPOCH, off_reasons.OffReason.STAFF)
    events.publish(session, club, "registration.created", registration(), EPOCH)
    assert [(d.status, d.next_attempt_at) for d in _deliveries(session)] == [("skipped", None)]


def test_with_the_module_off_events_are_recorded_without_deliveries(
    session: Session, settings: Settings
) -> None:
    club = make_club(session)
    make_endpoint(session, club, settings)
    clubs.set_webhooks_module(session, club.slug, False, EPOCH)
    event, _ = events.publish(session, club, "registration.created", registration(), EPOCH)
    assert session.get(Event, event.id) is not None
    assert _deliveries(session) == []


def test_switching_the_module_off_skips_waiting_deliveries(
    session: Session, settings: Settings
) -> None:
    club = make_club(session)
    make_endpoint(session, club, settings)
    events.publish(session, club, "registration.created", registration(), EPOCH)
    clubs.set_webhooks_module(session, club.slug, False, EPOCH)
    session.expire_all()
    assert [d.status for d in _deliveries(session)] == ["skipped"]


def test_an_idempotency_key_publishes_once(session: Session, settings: Settings) -> None:
    club = make_club(session)
    make_endpoint(session, club, settings)
    first, created = events.publish(
        session, club, "registration.created", registration(), EPOCH, "k-1"
    )
    again, again_created = events.publish(
        session, club, "registration.created", registration(), EPOCH, "k-1"
    )
    assert (created, again_created, again.id) == (True, False, first.id)
    assert len(_deliveries(session)) == 1
    other_club = make_club(session, "marble")
    elsewhere, created_elsewhere = events.publish(
        session, other_club, "registration.created", registration(), EPOCH, "k-1"
    )
    assert created_elsewhere
    assert elsewhere.id != first.id


@pytest.mark.parametrize(
    ("kind", "data", "message"),
    [
        ("registration.created", {"enrollment": {}}, "data"),
        ("registration.created", registration(extra="x"), "extra"),
        ("registration.deleted", {}, "registration.deleted"),
        ("ping", {"message": "hi"}, "ping"),
    ],
)
def test_invalid_events_store_nothing(
    session: Session, settings: Settings, kind: str, data: object, message: str
) -> None:
    club = make_club(session)
    make_endpoint(session, club, settings)
    with pytest.raises(errors.InvalidInput, match=message):
        events.publish(session, club, kind, data, EPOCH)
    assert session.scalar(select(func.count()).select_from(Event)) == 0


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("registration.created", registration(member={"id": "m2", "name": "B", "email": "b@x.ca"})),
        ("member.updated", event_catalog.sample("member.updated", EPOCH)),
    ],
)
def test_an_idempotency_key_reused_for_another_event_is_refused(
    session: Session, settings: Settings, kind: str, data: dict[str, object]
) -> None:
    """A key reused by mistake must not swallow the second event without a word."""
    club = make_club(session)
    make_endpoint(session, club, settings)
    first, _ = events.publish(session, club, "registration.created", registration(), EPOCH, "k-1")
    with pytest.raises(errors.IdempotencyKeyReused, match=f"first used for {first.id}"):
        events.publish(session, club, kind, data, EPOCH, "k-1")
    assert session.scalar(select(func.count()).select_from(Event)) == 1
    assert len(_deliveries(session)) == 1


def test_a_bad_idempotency_key_is_refused(session: Session) -> None:
    with pytest.raises(errors.InvalidInput, match="idempotency key"):
        events.publish(
            session, make_club(session), "registration.created", registration(), EPOCH, "x" * 256
        )
