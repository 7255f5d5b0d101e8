"""The realistic club the settings area is shown with: the demo's Granite Curling Club with
API keys, two endpoints and their deliveries, and three more clubs, with the staff who sign in
to see it. Shared by ``web/ui/test_pages`` and ``web/ui/test_phone_layout`` (the README's
pictures)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from clubwire.domain import event_catalog
from clubwire.domain.delivering import Status
from clubwire.services import clubs, demo, endpoints
from clubwire.services.club_api import keys
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Club, Delivery, Endpoint
from tests.factories import receiver_settings

ROOT = "ops@clubwire.example"
SECRETARY = "secretary@granitecurling.example"
WEBSITE_HOOKS = "https://www.granitecurling.example/hooks/clubwire"
CRM_HOOKS = "https://crm.example.net/webhooks/granite-curling"
OTHER_CLUBS = [
    ("harbour", "Harbour Curling Club", False),
    ("lakeside", "Lakeside Curling Centre", True),
    ("northern-lights", "Northern Lights Curling Club", False),
]


def delivered(
    session: Session,
    club: Club,
    kind: str,
    at: datetime,
    status: Status,
    code: int,
    attempt: int = 1,
    next_attempt_at: datetime | None = None,
) -> None:
    """An event published at ``at``, its deliveries already where ``status`` says: none is
    due, so the live server's worker leaves them alone."""
    event, _ = events.publish(
        session, club, kind, event_catalog.sample(kind, at, random.Random(7)), at
    )
    for delivery in session.scalars(select(Delivery).where(Delivery.event_id == event.id)):
        delivery.status, delivery.response_code = status, code
        delivery.attempt, delivery.next_attempt_at = attempt, next_attempt_at
        endpoint = session.get_one(Endpoint, delivery.endpoint_id)
        endpoint.last_delivery_at = at + timedelta(seconds=attempt)
        endpoint.last_response_code = code
        if status == Status.DEAD:
            endpoint.dead_in_a_row += 1


def seed_realistic_club(session: Session, settings: Settings, now: datetime) -> None:
    """The demo's Granite Curling Club with keys, two endpoints and their deliveries, and
    three more clubs; times are around ``now`` so that nothing waiting is due yet."""
    demo.seed(session, now - timedelta(days=30))
    granite = clubs.get_club(session, demo.SLUG)
    for slug, name, enabled in OTHER_CLUBS:
        clubs.put_club(session, slug, name, now - timedelta(days=90))
        clubs.set_webhooks_module(session, slug, enabled, now - timedelta(days=90))

    website, _ = keys.create_key(
        session, granite, ["read:programs"], "Club website", now - timedelta(days=21)
    )
    keys.note_use(session, website.id, now - timedelta(minutes=3))
    sync, _ = keys.create_key(
        session,
        granite,
        ["read:programs", "read:members", "read:invoices"],
        "Membership sync",
        now - timedelta(days=9),
    )
    keys.note_use(session, sync.id, now - timedelta(hours=2, minutes=14))
    kiosk, _ = keys.create_key(
        session, granite, ["read:games"], "Lobby scoreboard", now - timedelta(days=60)
    )
    keys.revoke_key(session, granite.id, kiosk.prefix, now - timedelta(days=6))

    hooks = receiver_settings(settings)
    endpoints.create_endpoint(
        session,
        granite,
        CRM_HOOKS,
        ["member.updated", "practice_ice.booked"],
        now - timedelta(days=30),
        hooks,
        max_rate=10,
    )
    endpoints.create_endpoint(
        session,
        granite,
        WEBSITE_HOOKS,
        ["registration.created", "payment.completed"],
        now - timedelta(days=14),
        hooks,
    )
    ok = Status.SUCCEEDED
    delivered(session, granite, "member.updated", now - timedelta(hours=26), ok, 200)
    delivered(session, granite, "member.updated", now - timedelta(hours=20), Status.DEAD, 503, 6)
    delivered(session, granite, "registration.created", now - timedelta(hours=3), ok, 200)
    delivered(session, granite, "payment.completed", now - timedelta(hours=2, minutes=58), ok, 200)
    delivered(session, granite, "registration.created", now - timedelta(minutes=41), ok, 200)
    delivered(session, granite, "payment.completed", now - timedelta(minutes=40), ok, 200)
    delivered(
        session,
        granite,
        "practice_ice.booked",
        now - timedelta(minutes=6),
        Status.PENDING,
        502,
        2,
        now + timedelta(minutes=5),
    )
