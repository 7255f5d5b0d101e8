"""An endpoint's headers of its own in a real browser: a reserved name refused beside its field
(the value typed never shown back), a header added, shown masked, still masked after a
reload, and removed. On SQLite and PostgreSQL (nothing is delivered, so no worker is
needed)."""

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
VALUE = "k3y-9c2b-shown-once"
MASKED = "X-Api-Key: ••••••••"


@pytest.fixture
def base_url(sessions: sessionmaker[Session], start_server: StartServer) -> str:
    granite_with_staff(sessions, ADMIN)
    return start_server()


def test_a_header_is_added_shown_masked_after_a_reload_and_removed(
    base_url: str, page: Page
) -> None:
    sign_in(page, base_url, ADMIN, PASSWORD)
    page.locator("#new-endpoint-url").fill(URL)
    page.locator("#new-endpoint-events-registration-created").check()
    page.get_by_role("button", name="Add endpoint").click()
    card = page.locator("article.endpoint")
    endpoint_id = (card.get_attribute("id") or "").removeprefix("endpoint-")
    shown = page.locator(f"#endpoint-{endpoint_id}-headers")
    expect(shown).to_have_text("none")

    # A reserved name: the message beside the name, and the value asked for again.
    card.get_by_role("button", name="Edit").click()
    page.get_by_label("Header name").fill("Host")
    page.get_by_label("Header value").fill(VALUE)
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#endpoint-headers-name-error")).to_contain_text(
        "Host cannot be one of an endpoint's headers"
    )
    expect(page.get_by_label("Header value")).to_have_value("")
    assert VALUE not in page.content()

    # Added: the card shows its name and a mask, never the value, after a reload too.
    page.get_by_label("Header name").fill("X-Api-Key")
    page.get_by_label("Header value").fill(VALUE)
    page.get_by_role("button", name="Save changes").click()
    expect(shown).to_have_text(MASKED)
    assert VALUE not in page.content()
    page.reload()
    expect(shown).to_have_text(MASKED)
    assert VALUE not in page.content()

    # Removed from the Edit form, where it shows masked as well.
    card.get_by_role("button", name="Edit").click()
    expect(page.get_by_label("Header value")).to_have_value("")
    assert VALUE not in page.content()
    page.get_by_label(f"Remove {MASKED}").check()
    page.get_by_role("button", name="Save changes").click()
    expect(shown).to_have_text("none")
