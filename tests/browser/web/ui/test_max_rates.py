"""An endpoint's max rate in a real browser: refused beside its field, set when the endpoint
is added, shown on its card, and cleared by editing. On SQLite and PostgreSQL (nothing is
delivered, so no worker is needed)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from tests.browser.helpers import granite_with_staff, sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD

pytestmark = pytest.mark.browser

ADMIN = "secretary@granite.example"
URL = "https://127.0.0.1:9/hooks"
LABEL = "Max deliveries per second"


@pytest.fixture
def base_url(sessions: sessionmaker[Session], start_server: StartServer) -> str:
    granite_with_staff(sessions, ADMIN)
    return start_server()


def test_a_max_rate_is_refused_set_shown_and_cleared(base_url: str, page: Page) -> None:
    sign_in(page, base_url, ADMIN, PASSWORD)
    page.locator("#new-endpoint-url").fill(URL)
    page.locator("#new-endpoint-events-registration-created").check()
    rate = page.get_by_label(LABEL)
    expect(rate).to_have_value("")

    # A bad value: the form comes back with the message beside the field, and what was typed.
    rate.fill("1e9")
    page.get_by_role("button", name="Add endpoint").click()
    expect(page.locator("#new-endpoint-max-rate-error")).to_have_text(
        'Error: "1e9" is not a max rate: write a whole number of deliveries per second, '
        "from 1 to 1000, with the digits 0-9 alone."
    )
    expect(rate).to_have_value("1e9")
    expect(rate).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#new-endpoint-url")).to_have_value(URL)
    expect(page.locator("article.endpoint")).to_have_count(0)

    # Set when the endpoint is added, and shown on its card.
    rate.fill("20")
    page.get_by_role("button", name="Add endpoint").click()
    card = page.locator("article.endpoint")
    expect(card).to_have_count(1)
    endpoint_id = (card.get_attribute("id") or "").removeprefix("endpoint-")
    shown = page.locator(f"#endpoint-{endpoint_id}-max-rate")
    expect(shown).to_have_text("20 deliveries per second")

    # Edit starts from what is saved; emptied, there is no limit.
    card.get_by_role("button", name="Edit").click()
    edited = page.get_by_label(LABEL)
    expect(edited).to_have_value("20")
    edited.fill("")
    page.get_by_role("button", name="Save changes").click()
    expect(shown).to_have_text("no limit")
    card.get_by_role("button", name="Edit").click()
    expect(page.get_by_label(LABEL)).to_have_value("")
