"""The settings area with a realistic club, as people see it (``test_phone_layout`` takes the
README's pictures of it), and every main page readable on a phone without scrolling sideways."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import demo
from clubwire.settings import Settings
from tests.browser.helpers import assert_fits_a_phone, sign_in
from tests.browser.live_server import StartServer
from tests.browser.seeding import CRM_HOOKS, ROOT, SECRETARY, WEBSITE_HOOKS, seed_realistic_club
from tests.factories import PASSWORD, make_staff

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

CLUB = "/settings/granite"


@pytest.fixture
def base_url(sessions: sessionmaker[Session], settings: Settings, start_server: StartServer) -> str:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    with sessions.begin() as session:
        seed_realistic_club(session, settings, now)
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
    expect(cards.first.locator("dl.facts > dd").nth(4)).to_have_text("10 deliveries per second")
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
