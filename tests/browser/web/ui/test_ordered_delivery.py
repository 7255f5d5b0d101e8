"""In order (issue 35) in a real browser, on a phone: the Add form's box, labelled and
described by its hint, ticked and saved; the card saying so; a held delivery's page saying
what it waits for, with no Retry button. Nothing scrolls sideways."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import timestamps
from clubwire.services import clubs, endpoints
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Delivery
from tests.browser.helpers import assert_fits_a_phone, granite_with_staff, sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD, about, receiver_settings

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ADMIN = "secretary@granite.example"
TAB = "/settings/granite/webhooks"
KIND = "registration.created"
BOX = "Deliver each resource's events in order"


@pytest.fixture
def base_url(sessions: sessionmaker[Session], start_server: StartServer) -> str:
    granite_with_staff(sessions, ADMIN)
    return start_server()


def _held(sessions: sessionmaker[Session], settings: Settings) -> str:
    """An ordered endpoint with two registrations of one invoice: the second's delivery,
    held behind the first (which the server's attempts at a closed port keep pending).
    Published now: the server's expiry would empty payloads as old as ``EPOCH``, and with
    them let the second go."""
    now = timestamps.utc_now()
    with sessions.begin() as session:
        granite = clubs.get_club(session, "granite")
        hooks = receiver_settings(settings)
        url = "https://127.0.0.1:9/held"
        endpoints.create_endpoint(session, granite, url, [KIND], now, hooks, ordered=True)
        second = [events.publish(session, granite, KIND, about(KIND), now)[0] for _ in range(2)][1]
        return session.scalars(select(Delivery.id).where(Delivery.event_id == second.id)).one()


def test_the_box_is_labelled_described_and_saved_on_a_phone(
    phone_page: Page, base_url: str
) -> None:
    page = phone_page
    sign_in(page, base_url, ADMIN, PASSWORD)
    page.goto(f"{base_url}{TAB}")
    box = page.get_by_label(BOX)
    expect(box).not_to_be_checked()
    expect(box).to_have_accessible_description(re.compile(r"^A game's, member's or invoice's"))
    assert_fits_a_phone(page)
    page.get_by_label("URL").fill("https://127.0.0.1:9/hooks")
    page.get_by_label("registration.created").check()
    box.check()
    page.get_by_role("button", name="Add endpoint").click()
    expect(page.locator("dd[id$='-order']")).to_have_text(re.compile(r"^In order"))
    assert_fits_a_phone(page)


def test_a_held_delivery_says_what_it_waits_for_and_offers_no_retry_on_a_phone(
    phone_page: Page, base_url: str, sessions: sessionmaker[Session], settings: Settings
) -> None:
    page = phone_page
    held = _held(sessions, settings)
    sign_in(page, base_url, ADMIN, PASSWORD)
    page.goto(f"{base_url}/settings/granite/deliveries/{held}")
    expect(page.locator("#next-attempt")).to_have_text(
        re.compile(r"^Waiting for sequence 1 of invoice:\S+ to be delivered$")
    )
    expect(page.get_by_role("button", name=re.compile(r"^Retry"))).to_have_count(0)
    assert_fits_a_phone(page)
    page.goto(f"{base_url}{TAB}")
    expect(page.locator(f"#delivery-{held} td.status")).to_contain_text("waiting")
    assert_fits_a_phone(page)
