"""The superadmin's Switch off in a real browser: a question first, saying what stops and
what is kept; Cancel changes nothing; the answer switches off and says so (issue 15, items 4
and 1)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs
from tests.browser.helpers import sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD, make_club, make_staff

pytestmark = pytest.mark.browser

ROOT = "root@clubwire.example"


def _enabled(sessions: sessionmaker[Session]) -> bool:
    with sessions() as session:
        return clubs.get_club(session, "granite").webhooks_enabled


def test_switch_off_asks_first_and_cancel_changes_nothing(
    sessions: sessionmaker[Session], start_server: StartServer, page: Page
) -> None:
    with sessions.begin() as session:
        make_club(session, "granite", enabled=True, name="Granite Curling Club")
    make_staff(sessions, ROOT, superadmin=True)
    base_url = start_server()
    sign_in(page, base_url, ROOT, PASSWORD)
    granite = page.locator("#club-granite")

    granite.get_by_role("button", name=re.compile("^Switch off")).click()
    expect(page).to_have_url(re.compile(re.escape(f"{base_url}/admin/clubs/granite/webhooks/off")))
    expect(page.get_by_role("heading", level=2)).to_have_text(
        "Switch off Webhooks & API for Granite Curling Club?"
    )
    expect(page.locator("#what-stops")).to_contain_text("API answers 401")
    expect(page.locator("#what-is-kept")).to_contain_text("API keys")
    page.get_by_role("link", name="Cancel").click()
    expect(page).to_have_url(f"{base_url}/admin#club-granite")
    expect(granite.locator(".state")).to_have_text("On")
    assert _enabled(sessions)

    granite.get_by_role("button", name=re.compile("^Switch off")).click()
    page.locator("section.confirm").get_by_role("button", name="Switch off").click()
    expect(page).to_have_url(f"{base_url}/admin#club-granite")
    expect(page.get_by_role("status")).to_have_text(
        "Webhooks & API switched off for Granite Curling Club."
    )
    expect(granite.locator(".state")).to_have_text("Off")
    assert not _enabled(sessions)
    # Switching on again asks nothing.
    granite.get_by_role("button", name=re.compile("^Switch on")).click()
    expect(granite.locator(".state")).to_have_text("On")
    assert _enabled(sessions)
