"""The settings area with JavaScript switched off: htmx only makes pages smoother, so Send
test, Retry, the Enabled switch and a new key (shown as plain text, no Copy button) all
work as ordinary forms."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Status
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Delivery
from tests.browser.helpers import sign_in
from tests.browser.live_server import StartServer
from tests.factories import EPOCH, PASSWORD, make_club, make_endpoint, make_staff, registration
from tests.receiver import Authority, Receiver

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ADMIN = "secretary@granite.example"
TAB = "/settings/granite/webhooks"


@pytest.fixture
def no_script_page(browser: Browser) -> Iterator[Page]:
    """A page in a fresh context with JavaScript off."""
    context = browser.new_context(java_script_enabled=False, locale="en-GB", timezone_id="UTC")
    try:
        yield context.new_page()
    finally:
        context.close()


def test_the_settings_area_works_without_javascript(
    sessions: sessionmaker[Session],
    settings: Settings,
    start_server: StartServer,
    tls: Authority,
    receiver: Receiver,
    no_script_page: Page,
) -> None:
    page = no_script_page
    with sessions.begin() as session:
        club = make_club(session, "granite", name="Granite Curling Club")
        endpoint, _ = make_endpoint(session, club, settings, receiver.url)
        events.publish(session, club, "registration.created", registration(), EPOCH)
        session.execute(update(Delivery).values(status=Status.DEAD, attempt=6, response_code=503))
        delivery = session.scalars(select(Delivery.id)).one()
    make_staff(sessions, ADMIN, clubs=["granite"])
    base_url = start_server(ca_bundle=tls.bundle)
    sign_in(page, base_url, ADMIN, PASSWORD)
    card = page.locator(f"#endpoint-{endpoint.id}")

    page.locator(f"#test-{endpoint.id}").click()
    expect(page.locator(f"#endpoint-{endpoint.id}-test")).to_have_text(
        re.compile(r"^Send test: 200 in \d+ ms$")
    )
    page.goto(f"{base_url}{TAB}")
    page.locator(f"#retry-{delivery}").click()
    expect(page).to_have_url(f"{base_url}{TAB}#endpoint-{endpoint.id}")
    receiver.wait_for(2)

    page.locator(f"#switch-{endpoint.id}").click()
    off = page.locator(f"#endpoint-{endpoint.id}-off")
    expect(off).to_contain_text("Switched off by a club admin")
    expect(page.locator(f"#switch-{endpoint.id}")).to_have_attribute("aria-checked", "false")
    page.locator(f"#switch-{endpoint.id}").click()
    expect(page.locator(f"#switch-{endpoint.id}")).to_have_attribute("aria-checked", "true")
    expect(card.locator(".notice")).to_have_count(0)

    page.locator("#tab-api-keys").click()
    page.locator("#key-name").fill("Club website")
    page.get_by_role("button", name="Create key").click()
    expect(page.locator("code#new-key")).to_have_text(re.compile(r"^cw_live_\w+$"))
    expect(page.locator("section.secret").get_by_role("button", name="Copy")).to_be_hidden()
