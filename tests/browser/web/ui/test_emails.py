"""Emails about failing endpoints in a real browser: an admin turns them off for themselves
and on again from the Webhooks tab; without a mail server the tab says email is off."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services.mail import notifications
from clubwire.storage.models import Club
from tests.browser.helpers import granite_with_staff, sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD

pytestmark = pytest.mark.browser

ADMIN = "secretary@granite.example"


def _recipients(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        club = session.scalars(select(Club).where(Club.slug == "granite")).one()
        return list(notifications.recipients(session, club.id))


def test_an_admin_turns_the_emails_off_and_on_again(
    sessions: sessionmaker[Session], start_server: StartServer, page: Page
) -> None:
    granite_with_staff(sessions, ADMIN)
    base_url = start_server(
        CLUBWIRE_SMTP_URL="smtp://127.0.0.1:9", CLUBWIRE_MAIL_FROM="hooks@granite.example"
    )
    sign_in(page, base_url, ADMIN, PASSWORD)
    page.goto(f"{base_url}/settings/granite/webhooks")
    state = page.locator("#failure-emails-state")
    expect(state).to_have_text("You get these emails.")

    page.get_by_role("button", name="Stop emailing me").click()
    expect(page).to_have_url(re.compile(r"/settings/granite/webhooks#failure-emails$"))
    expect(state).to_have_text("You do not get these emails.")
    assert _recipients(sessions) == []

    page.reload()
    page.get_by_role("button", name="Email me again").click()
    expect(state).to_have_text("You get these emails.")
    assert _recipients(sessions) == [ADMIN]


def test_without_a_mail_server_the_tab_says_email_is_off(
    sessions: sessionmaker[Session], start_server: StartServer, page: Page
) -> None:
    granite_with_staff(sessions, ADMIN)
    base_url = start_server()
    sign_in(page, base_url, ADMIN, PASSWORD)
    page.goto(f"{base_url}/settings/granite/webhooks")
    expect(page.locator("#failure-emails-off")).to_contain_text("Email is off")
    expect(page.get_by_role("button", name="Stop emailing me")).to_have_count(0)
