"""Payloads kept for fewer days, in a real browser on a phone (issue 34, item 2): the
superadmin sets a club's days on the superadmin page, a wrong number is explained beside its
field, and once pruning has run the delivery's page says payload expired and offers no Retry.
On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import timestamps
from clubwire.services import clubs, retention
from clubwire.settings import Settings
from tests.browser.helpers import assert_fits_a_phone, sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD, make_club, make_delivery, make_endpoint, make_staff

pytestmark = pytest.mark.browser

ROOT = "root@clubwire.example"


@pytest.fixture
def old_delivery(sessions: sessionmaker[Session], settings: Settings) -> str:
    """Granite's dead delivery of ten days ago."""
    with sessions.begin() as session:
        granite = make_club(session, "granite", name="Granite Curling Club")
        make_club(session, "lakeside", name="Lakeside Curling Centre")
        endpoint, _ = make_endpoint(session, granite, settings)
        ten_days_ago = timestamps.utc_now() - timedelta(days=10)
        delivery_id = make_delivery(session, granite, endpoint, ten_days_ago)
    make_staff(sessions, ROOT, superadmin=True)
    return delivery_id


def _payload_days(sessions: sessionmaker[Session], slug: str) -> int | None:
    with sessions() as session:
        return clubs.get_club(session, slug).payload_days


def test_a_superadmin_keeps_payloads_seven_days_and_the_delivery_says_payload_expired(
    old_delivery: str,
    start_server: StartServer,
    phone_page: Page,
    sessions: sessionmaker[Session],
    settings: Settings,
) -> None:
    page = phone_page
    base_url = start_server()
    sign_in(page, base_url, ROOT, PASSWORD)
    expect(page).to_have_url(f"{base_url}/admin")
    granite = page.locator("#club-granite")
    days = granite.get_by_role("textbox", name="Days to keep the payloads of Granite")

    days.fill("45")
    granite.get_by_role("button", name="Save the days of Granite Curling Club").click()
    expect(days).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#payload-days-granite-error")).to_contain_text("from 1 to 30")
    assert_fits_a_phone(page)
    assert _payload_days(sessions, "granite") is None

    days.fill("7")
    granite.get_by_role("button", name="Save the days of Granite Curling Club").click()
    expect(page).to_have_url(f"{base_url}/admin#club-granite")
    expect(
        page.get_by_text("Payloads of Granite Curling Club are now kept for 7 days.")
    ).to_be_visible()
    expect(days).to_have_value("7")
    expect(page.locator("#payload-days-lakeside")).to_have_value("")
    assert_fits_a_phone(page)
    assert _payload_days(sessions, "granite") == 7

    period = timedelta(days=settings.retention_days)
    assert retention.prune(sessions, timestamps.utc_now(), period).payloads == 1
    page.goto(f"{base_url}/settings/granite/deliveries/{old_delivery}")
    expect(page.locator("#payload")).to_contain_text("payload expired")
    expect(page.locator("#not-retried")).to_contain_text("(payload expired)")
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)
    assert_fits_a_phone(page)
