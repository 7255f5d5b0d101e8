"""The superadmin page in a real browser: the module switched on for a club, and the one
message a club's settings show while its module is off. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs
from tests.browser.helpers import sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD, make_club, make_staff

pytestmark = pytest.mark.browser

ROOT = "root@clubwire.example"
MODULE_OFF = "Webhooks & API are not enabled for this club"


@pytest.fixture
def base_url(sessions: sessionmaker[Session], start_server: StartServer) -> str:
    with sessions.begin() as session:
        make_club(session, "granite", enabled=False, name="Granite Curling Club")
        make_club(session, "lakeside", enabled=False, name="Lakeside Curling Centre")
    make_staff(sessions, ROOT, superadmin=True)
    return start_server()


def _enabled(sessions: sessionmaker[Session], slug: str) -> bool:
    with sessions() as session:
        return clubs.get_club(session, slug).webhooks_enabled


def test_a_superadmin_switches_the_module_on_and_only_that_club_gets_its_tabs(
    base_url: str, page: Page, sessions: sessionmaker[Session]
) -> None:
    sign_in(page, base_url, ROOT, PASSWORD)
    expect(page).to_have_url(f"{base_url}/admin")
    granite = page.locator("#club-granite")
    expect(granite.locator(".state")).to_have_text("Off")

    granite.get_by_role("button", name="Switch on").click()

    expect(page).to_have_url(f"{base_url}/admin#club-granite")
    expect(granite.locator(".state")).to_have_text("On")
    expect(granite.get_by_role("button", name="Switch off")).to_be_visible()
    expect(page.locator("#club-lakeside .state")).to_have_text("Off")
    assert _enabled(sessions, "granite")
    assert not _enabled(sessions, "lakeside")
    granite.get_by_role("link", name="Granite Curling Club").click()
    expect(page).to_have_url(f"{base_url}/settings/granite/webhooks")
    expect(page.locator("#tab-webhooks")).to_have_attribute("aria-current", "page")
    expect(page.locator("#tab-api-keys")).to_be_visible()
    expect(page.locator("#module-off")).to_have_count(0)
    expect(page.get_by_role("button", name="Add endpoint")).to_be_visible()

    # The club still off shows only the message, on both tabs.
    page.get_by_role("link", name="Superadmin").click()
    page.locator("#club-lakeside").get_by_role("link", name="Lakeside Curling Centre").click()
    for tab in ("webhooks", "api-keys"):
        expect(page).to_have_url(f"{base_url}/settings/lakeside/{tab}")
        expect(page.locator("#module-off")).to_have_text(MODULE_OFF)
        expect(page.locator("main form")).to_have_count(0)
        expect(page.locator("#tab-webhooks, #tab-api-keys")).to_have_count(0)
        page.goto(f"{base_url}/settings/lakeside/api-keys")
