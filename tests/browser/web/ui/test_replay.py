"""Replay… in a real browser, against a real local HTTPS receiver (issue 14, item 1): the
form, the preview's count, the confirmation, the deliveries arriving again (same ids, a
fresh signature), the outcome shown once, and neither a double click nor a reload replays
anything twice.

SQLite only: there ``serve`` delivers in its own process (PostgreSQL needs a worker); the
same pages are tested on both databases server-side (tests/functional/web/ui/test_replay.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import signing
from clubwire.settings import Settings
from clubwire.storage.models import Attempt
from tests.browser.helpers import assert_fits_a_phone, sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD, make_club, make_delivery, make_endpoint, make_staff
from tests.receiver import Authority, Receiver

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ADMIN = "secretary@granite.example"
TAB = "/settings/granite/webhooks"
FIELD_TIME = "%Y-%m-%dT%H:%M"


def _attempts(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(Attempt)) or 0


def test_a_window_is_previewed_replayed_once_and_said_once(
    sessions: sessionmaker[Session],
    settings: Settings,
    start_server: StartServer,
    tls: Authority,
    receiver: Receiver,
    page: Page,
) -> None:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    with sessions.begin() as session:
        club = make_club(session, "granite", name="Granite Curling Club")
        endpoint, secret = make_endpoint(session, club, settings, receiver.url)
        dead = {make_delivery(session, club, endpoint, now - timedelta(minutes=m)) for m in (3, 2)}
        make_delivery(session, club, endpoint, now - timedelta(hours=3))  # outside the window
    make_staff(sessions, ADMIN, clubs=["granite"])
    base_url = start_server(ca_bundle=tls.bundle)

    sign_in(page, base_url, ADMIN, PASSWORD)
    page.goto(f"{base_url}{TAB}")
    page.locator(f"#replay-{endpoint.id}").click()
    page.get_by_label("From (UTC)").fill((now - timedelta(hours=1)).strftime(FIELD_TIME))
    page.get_by_label("To (UTC)").fill((now + timedelta(minutes=1)).strftime(FIELD_TIME))
    expect(page.locator("#replay-statuses-dead")).to_be_checked()
    page.get_by_role("button", name="Preview").click()

    expect(page.locator("#replay-count")).to_have_text("2 deliveries will be replayed.")
    assert receiver.received == []
    page.locator("#replay-confirm").dblclick()  # a double click posts it twice, at most
    expect(page).to_have_url(f"{base_url}{TAB}#endpoint-{endpoint.id}")
    notice = page.locator(f"#endpoint-{endpoint.id}-replayed")
    expect(notice).to_have_text("Replayed 2 deliveries.")

    arrived = receiver.wait_for(2)
    assert {a.headers["X-Service-Delivery"] for a in arrived} == dead
    for arrival in arrived:
        signing.verify(arrival.body, arrival.headers["X-Service-Signature"], secret)
    page.reload()
    expect(page.locator("article.endpoint")).to_be_visible()
    expect(notice).to_have_count(0)
    time.sleep(1.0)  # what a second replay would have sent would have arrived by now
    assert len(receiver.received) == 2
    assert _attempts(sessions) == 2


def test_the_replay_pages_fit_a_phone(
    sessions: sessionmaker[Session],
    settings: Settings,
    start_server: StartServer,
    phone_page: Page,
) -> None:
    with sessions.begin() as session:
        club = make_club(session, "granite", name="Granite Curling Club")
        endpoint, _ = make_endpoint(session, club, settings)
        make_delivery(session, club, endpoint, datetime.now(UTC) - timedelta(minutes=5))
    make_staff(sessions, ADMIN, clubs=["granite"])
    base_url = start_server()
    sign_in(phone_page, base_url, ADMIN, PASSWORD)
    phone_page.goto(f"{base_url}{TAB}/{endpoint.id}/replay")
    assert_fits_a_phone(phone_page)
    phone_page.get_by_role("button", name="Preview").click()
    expect(phone_page.locator("#replay-count")).to_have_text("1 delivery will be replayed.")
    assert_fits_a_phone(phone_page)
