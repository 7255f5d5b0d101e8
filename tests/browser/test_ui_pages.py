"""The settings area with a realistic club, as people see it (``test_ui_phone_layout`` takes the
README's pictures of it), and every main page readable on a phone without scrolling sideways."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog
from clubwire.domain.delivering import Status
from clubwire.services import clubs, demo, endpoints
from clubwire.services.club_api import keys
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Club, Delivery, Endpoint
from tests.browser.helpers import assert_fits_a_phone, sign_in
from tests.browser.live_server import StartServer
from tests.factories import receiver_settings
from tests.functional.ui_pages import PASSWORD, make_staff

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ROOT = "ops@clubwire.example"
SECRETARY = "secretary@granitecurling.example"
CLUB = "/settings/granite"
WEBSITE_HOOKS = "https://www.granitecurling.example/hooks/clubwire"
CRM_HOOKS = "https://crm.example.net/webhooks/granite-curling"
OTHER_CLUBS = [
    ("harbour", "Harbour Curling Club", False),
    ("lakeside", "Lakeside Curling Centre", True),
    ("northern-lights", "Northern Lights Curling Club", False),
]


def _delivered(
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


def _seed(session: Session, settings: Settings, now: datetime) -> None:
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
    _delivered(session, granite, "member.updated", now - timedelta(hours=26), ok, 200)
    _delivered(session, granite, "member.updated", now - timedelta(hours=20), Status.DEAD, 503, 6)
    _delivered(session, granite, "registration.created", now - timedelta(hours=3), ok, 200)
    _delivered(session, granite, "payment.completed", now - timedelta(hours=2, minutes=58), ok, 200)
    _delivered(session, granite, "registration.created", now - timedelta(minutes=41), ok, 200)
    _delivered(session, granite, "payment.completed", now - timedelta(minutes=40), ok, 200)
    _delivered(
        session,
        granite,
        "practice_ice.booked",
        now - timedelta(minutes=6),
        Status.PENDING,
        502,
        2,
        now + timedelta(minutes=5),
    )


@pytest.fixture
def base_url(sessions: sessionmaker[Session], settings: Settings, start_server: StartServer) -> str:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    with sessions.begin() as session:
        _seed(session, settings, now)
    make_staff(sessions, ROOT, superadmin=True)
    make_staff(sessions, SECRETARY, clubs=[demo.SLUG])
    return start_server()


def test_the_superadmin_page_and_both_tabs_with_a_realistic_club(base_url: str, page: Page) -> None:
    sign_in(page, base_url, ROOT, PASSWORD)

    expect(page.locator("tbody tr")).to_have_count(4)
    expect(page.locator("#club-granite th")).to_have_text("Granite Curling Club")
    expect(page.locator("tbody td.state")).to_have_text(["On", "Off", "On", "Off"])

    page.get_by_role("link", name="Granite Curling Club").click()
    cards = page.locator("article.endpoint")
    expect(cards.locator("h3")).to_have_text([CRM_HOOKS, WEBSITE_HOOKS])
    expect(cards.first.locator("td.status")).to_have_text(["pending", "dead", "succeeded"])
    expect(cards.first.locator("dl.facts > dd").nth(3)).to_have_text("1 of 5")
    expect(cards.first.locator("dl.facts > dd").last).to_have_text("10 deliveries per second")
    expect(cards.last.locator("table.deliveries tbody tr")).to_have_count(4)

    page.locator("#tab-api-keys").click()
    expect(page.locator("#keys tbody tr td:nth-child(2)")).to_have_text(
        ["Membership sync", "Club website", "Demo key", "Lobby scoreboard"]
    )
    expect(page.locator("#keys td.state")).to_have_text(["active", "active", "active", "revoked"])


def test_every_main_page_fits_a_phone(base_url: str, phone_page: Page) -> None:
    phone_page.goto(f"{base_url}/sign-in")
    assert_fits_a_phone(phone_page)
    sign_in(phone_page, base_url, SECRETARY, PASSWORD)

    expect(phone_page).to_have_url(f"{base_url}{CLUB}/webhooks")
    assert_fits_a_phone(phone_page)
    phone_page.locator("article.endpoint").first.locator("tbody tr a").first.click()
    expect(phone_page.get_by_role("heading", name="Attempts")).to_be_visible()
    assert_fits_a_phone(phone_page)
    phone_page.locator("#tab-api-keys").click()
    expect(phone_page.locator("#keys tbody tr")).to_have_count(4)
    assert_fits_a_phone(phone_page)

    phone_page.get_by_role("button", name="Sign out").click()
    sign_in(phone_page, base_url, ROOT, PASSWORD)
    expect(phone_page.get_by_role("heading", level=1)).to_have_text("Superadmin: clubs")
    assert_fits_a_phone(phone_page)
