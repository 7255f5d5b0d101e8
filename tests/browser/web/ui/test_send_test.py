"""Send test in a real browser: a failed test shows as a test among the deliveries, with no
Retry, and is no endpoint's last delivery (issue 15, item 3)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs
from clubwire.settings import Settings
from tests.browser.helpers import sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD, make_club, make_endpoint, make_staff
from tests.receiver import Authority, serving

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ADMIN = "secretary@granite.example"


def test_a_failed_send_test_reads_as_a_test_not_a_dead_delivery(
    sessions: sessionmaker[Session],
    settings: Settings,
    start_server: StartServer,
    tls: Authority,
    page: Page,
) -> None:
    with serving(tls, status=500) as failing:
        with sessions.begin() as session:
            make_club(session, "granite", name="Granite Curling Club")
            endpoint, _ = make_endpoint(
                session, clubs.get_club(session, "granite"), settings, failing.url
            )
            endpoint_id = endpoint.id
        make_staff(sessions, ADMIN, clubs=["granite"])
        base_url = start_server(ca_bundle=tls.bundle)
        sign_in(page, base_url, ADMIN, PASSWORD)
        page.goto(f"{base_url}/settings/granite/webhooks")
        page.locator(f"#test-{endpoint_id}").click()
        card = page.locator(f"#endpoint-{endpoint_id}")
        expect(page.get_by_role("status").locator(f"#endpoint-{endpoint_id}-test")).to_have_text(
            re.compile(r"^Send test: failed: the receiver answered 500")
        )
    row = card.locator("table.deliveries tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td.status")).to_have_text(
        re.compile(r"^Test failed: the receiver answered 500 \(after \d+ ms\)$")
    )
    expect(row.get_by_role("button", name=re.compile("^Retry"))).to_have_count(0)
    expect(card.locator("dl.facts > dd")).to_contain_text(["never", "0 of 5"])
