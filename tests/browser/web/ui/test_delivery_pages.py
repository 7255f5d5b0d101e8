"""An endpoint's deliveries page in a real browser (issue 15, item 6): reached from Recent
deliveries, filtered by a GET form (the address says the filter), paged Older and back
Newer, a delivery opened from it, and no sideways scrolling on a phone.

SQLite only, as the other browser tests; the page is tested on both databases server-side
(tests/functional/web/ui/test_delivery_pages.py,
tests/integration/services/delivery/test_delivery_pages.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Status
from clubwire.settings import Settings
from tests.browser.helpers import assert_fits_a_phone, sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD, make_club, make_delivery, make_endpoint, make_staff

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ADMIN = "secretary@granite.example"
TAB = "/settings/granite/webhooks"
ROWS = "#deliveries tbody tr"


@pytest.fixture
def newest_first(sessions: sessionmaker[Session], settings: Settings) -> tuple[str, list[str]]:
    """Granite's endpoint and its 70 finished deliveries, one a minute (every 7th
    succeeded, the rest dead): none due, so the live server sends nothing."""
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=2)
    with sessions.begin() as session:
        club = make_club(session, "granite", name="Granite Curling Club")
        endpoint, _ = make_endpoint(session, club, settings)
        made = [
            make_delivery(
                session,
                club,
                endpoint,
                start + timedelta(minutes=n),
                Status.SUCCEEDED if n % 7 == 0 else Status.DEAD,
            )
            for n in range(70)
        ]
    make_staff(sessions, ADMIN, clubs=["granite"])
    return endpoint.id, made[::-1]


def test_filter_older_newer_and_a_delivery(
    start_server: StartServer, page: Page, newest_first: tuple[str, list[str]]
) -> None:
    endpoint_id, made = newest_first
    base_url = start_server()
    sign_in(page, base_url, ADMIN, PASSWORD)
    page.goto(f"{base_url}{TAB}")
    page.locator(f"#all-deliveries-{endpoint_id}").click()

    expect(page.get_by_role("heading", name="Deliveries to")).to_be_visible()
    expect(page.locator(ROWS)).to_have_count(50)
    expect(page.locator(ROWS).first).to_have_id(f"delivery-{made[0]}")
    page.get_by_label("Status").select_option("succeeded")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(
        f"{base_url}{TAB}/{endpoint_id}/deliveries?status=succeeded&event=&since=&until="
    )
    expect(page.locator(ROWS)).to_have_count(10)
    expect(page.locator(ROWS).locator(".status")).to_have_text(["succeeded"] * 10)
    page.reload()  # the address holds the filter
    expect(page.locator(ROWS)).to_have_count(10)

    page.get_by_role("link", name="Clear").click()
    page.get_by_role("link", name="Older").click()
    expect(page.locator(ROWS)).to_have_count(20)
    expect(page.locator(ROWS).last).to_have_id(f"delivery-{made[-1]}")
    expect(page.get_by_role("link", name="Older")).to_have_count(0)
    page.get_by_role("link", name="Newer").click()
    expect(page.locator(ROWS)).to_have_count(50)
    expect(page.locator(ROWS).first).to_have_id(f"delivery-{made[0]}")
    expect(page.get_by_role("link", name="Newer")).to_have_count(0)

    page.locator(f"#delivery-{made[1]} a").click()
    expect(page).to_have_url(f"{base_url}/settings/granite/deliveries/{made[1]}")
    expect(page.get_by_role("heading", name="Attempts")).to_be_visible()


def test_the_page_fits_a_phone(
    start_server: StartServer, phone_page: Page, newest_first: tuple[str, list[str]]
) -> None:
    endpoint_id, _ = newest_first
    base_url = start_server()
    sign_in(phone_page, base_url, ADMIN, PASSWORD)
    phone_page.goto(f"{base_url}{TAB}/{endpoint_id}/deliveries")
    expect(phone_page.locator(ROWS)).to_have_count(50)
    assert_fits_a_phone(phone_page)
    phone_page.goto(f"{base_url}{TAB}/{endpoint_id}/deliveries?status=bogus")
    expect(phone_page.locator("#deliveries-status-error")).to_be_visible()
    assert_fits_a_phone(phone_page)
