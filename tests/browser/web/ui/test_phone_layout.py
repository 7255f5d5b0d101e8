"""Every page of the settings area on a phone (390x844) and a laptop (1280 wide), with a
realistic club and an endpoint whose URL is long: nothing scrolls sideways, and every action
button lies inside the screen. Tables turn into labelled cards on the phone.

With ``CLUBWIRE_SCREENSHOTS=1`` this writes the README's pictures, the phone ones too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Locator, Page, expect
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Status
from clubwire.services import clubs, demo, endpoints
from clubwire.settings import Settings
from clubwire.storage.models import Attempt, Delivery, Endpoint
from tests.browser.helpers import screenshot, sign_in
from tests.browser.live_server import StartServer
from tests.browser.seeding import ROOT, SECRETARY, delivered, seed_realistic_club
from tests.factories import PASSWORD, make_staff, receiver_settings

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

CLUB = f"/settings/{demo.SLUG}"
LONG_URL = (
    "https://hooks.granitecurling.example/integrations/clubwire/v2/receivers/"
    "registrations-and-payments/endpoint-7f3a9c2e41b8d6"
)
SCREENS = {"desktop": "page", "phone": "phone_page"}


@pytest.fixture(params=sorted(SCREENS))
def screen(request: pytest.FixtureRequest) -> tuple[str, Page]:
    """The screen's name and a page of that size."""
    page: Page = request.getfixturevalue(SCREENS[request.param])
    return request.param, page


@pytest.fixture
def base_url(sessions: sessionmaker[Session], settings: Settings, start_server: StartServer) -> str:
    """The realistic club of ``test_pages``, plus an endpoint with a long URL and a dead
    delivery."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    with sessions.begin() as session:
        seed_realistic_club(session, settings, now)
        granite = clubs.get_club(session, demo.SLUG)
        endpoints.create_endpoint(
            session,
            granite,
            LONG_URL,
            ["payment.completed"],
            now - timedelta(days=2),
            receiver_settings(settings),
        )
        delivered(
            session, granite, "payment.completed", now - timedelta(minutes=9), Status.DEAD, 500, 6
        )
        session.flush()
        _attempts(session, LONG_URL, now - timedelta(minutes=9))
    make_staff(sessions, ROOT, superadmin=True)
    make_staff(sessions, SECRETARY, clubs=[demo.SLUG])
    return start_server()


def _attempts(session: Session, url: str, at: datetime) -> None:
    """Six failed attempts, each with a JSON error body, for the delivery to ``url``."""
    delivery = session.scalars(
        select(Delivery)
        .join(Endpoint, Delivery.endpoint_id == Endpoint.id)
        .where(Endpoint.url == url)
    ).one()
    for number in range(1, 7):
        session.add(
            Attempt(
                delivery_id=delivery.id,
                number=number,
                trigger="scheduled",
                started_at=at + timedelta(minutes=2**number),
                duration_ms=180 + number,
                response_code=500,
                error=None,
                excerpt='{"error": "database unavailable", "request_id": "req_8c1f0b9a27d4"}',
            )
        )


def _long_endpoint(sessions: sessionmaker[Session]) -> tuple[str, str]:
    """The long URL's endpoint id, and the id of a delivery to it."""
    with sessions.begin() as session:
        endpoint = session.scalars(select(Endpoint).where(Endpoint.url == LONG_URL)).one()
        delivery = session.scalars(
            select(Delivery).where(Delivery.endpoint_id == endpoint.id)
        ).first()
        assert delivery is not None
        return endpoint.id, str(delivery.id)


def assert_everything_within_reach(page: Page, *actions: str) -> None:
    """Nothing scrolls sideways, each of ``actions`` is there, and every button on the page
    ends inside the screen's width."""
    width, content = page.evaluate("[window.innerWidth, document.documentElement.scrollWidth]")
    assert content <= width, f"{page.url}: {content} px wide on a {width} px screen"
    for name in actions:
        button = page.get_by_role("button", name=name).or_(page.get_by_role("switch", name=name))
        expect(button.first).to_be_visible()
    outside = page.evaluate(
        """(width) => [...document.querySelectorAll('button, input, select, a')]
             .filter(e => e.getClientRects().length)
             .filter(e => e.getBoundingClientRect().right > width + 0.5)
             .map(e => e.outerHTML.slice(0, 120))""",
        width,
    )
    assert outside == [], f"{page.url}: beyond the right edge: {outside}"


def _picture(page: Page, name: str, size: str) -> None:
    screenshot(page, name if size == "desktop" else f"{name}-phone", full_page=False)


def test_every_page_keeps_its_values_and_actions_on_screen(
    base_url: str, sessions: sessionmaker[Session], screen: tuple[str, Page]
) -> None:
    size, page = screen
    endpoint_id, delivery_id = _long_endpoint(sessions)
    endpoint = f"{CLUB}/webhooks/{endpoint_id}"

    page.goto(f"{base_url}/sign-in")
    assert_everything_within_reach(page, "Sign in")
    sign_in(page, base_url, SECRETARY, PASSWORD)

    expect(page).to_have_url(f"{base_url}{CLUB}/webhooks")
    expect(page.locator(f"#endpoint-{endpoint_id} h3")).to_have_text(LONG_URL)
    assert_everything_within_reach(
        page, "Retry", "Enabled", "Send test", "Replay…", "Delete", "Rotate secret", "Edit"
    )
    if size == "phone":  # the endpoint with the long URL, down to its deliveries
        page.locator(f"#endpoint-{endpoint_id}").evaluate("card => card.scrollIntoView()")
    _picture(page, "webhooks-tab", size)

    page.goto(f"{base_url}{endpoint}/deliveries")
    expect(page.locator("#deliveries tbody tr")).to_have_count(1)
    assert_everything_within_reach(page, "Retry", "Filter")

    page.goto(f"{base_url}{CLUB}/deliveries/{delivery_id}")
    expect(page.locator("table.attempts tbody tr")).to_have_count(6)
    assert_everything_within_reach(page, "Retry")

    for path, action in [
        ("/edit", "Save changes"),
        ("/rotate", "Rotate secret"),
        ("/delete", "Delete endpoint"),
        ("/replay", "Preview"),
    ]:
        page.goto(f"{base_url}{endpoint}{path}")
        assert_everything_within_reach(page, action)
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#replay-count")).to_contain_text("1 delivery")
    assert_everything_within_reach(page, "Replay 1 delivery")

    page.goto(f"{base_url}{CLUB}/api-keys")
    expect(page.locator("#keys tbody tr")).to_have_count(4)
    assert_everything_within_reach(page, "Revoke", "Create key")
    _picture(page, "api-keys-tab", size)
    page.get_by_role("button", name="Revoke").first.click()
    assert_everything_within_reach(page, "Revoke key")

    page.get_by_role("button", name="Sign out").click()
    sign_in(page, base_url, ROOT, PASSWORD)
    expect(page.get_by_role("heading", level=1)).to_have_text("Superadmin: clubs")
    assert_everything_within_reach(page, "Switch off…", "Switch on")
    if size == "desktop":  # the page is short
        page.set_viewport_size({"width": 1280, "height": 600})
    _picture(page, "superadmin", size)
    page.get_by_role("button", name="Switch off…").first.click()
    assert_everything_within_reach(page, "Switch off")


def _labels(row: Locator) -> list[str]:
    """What each cell of ``row`` shows before its value (CSS ``content``, ``none`` if nothing)."""
    cells = row.locator("td")
    return [
        cells.nth(i).evaluate("cell => getComputedStyle(cell, '::before').content")
        for i in range(cells.count())
    ]


def test_a_table_row_on_a_phone_is_a_card_whose_values_say_what_they_are(
    base_url: str, phone_page: Page, page: Page
) -> None:
    sign_in(phone_page, base_url, SECRETARY, PASSWORD)
    phone_page.goto(f"{base_url}{CLUB}/api-keys")
    row = phone_page.locator("#keys tbody tr").first
    assert _labels(row) == [
        '"Name"',
        '"Scopes"',
        '"Last used"',
        '"Expires"',
        '"Status"',
        '"Action"',
    ]
    expect(phone_page.locator("#keys thead")).not_to_be_in_viewport()
    name, scopes = row.locator("td").nth(0).bounding_box(), row.locator("td").nth(1).bounding_box()
    assert name is not None
    assert scopes is not None
    assert scopes["y"] >= name["y"] + name["height"] - 1, "cells stack, one under the other"

    phone_page.goto(f"{base_url}{CLUB}/webhooks")
    delivery = phone_page.locator("table.deliveries tbody tr").first
    assert _labels(delivery) == [
        '"Event"',
        '"Status"',
        '"Response code"',
        '"Attempt"',
        '"Next attempt"',
        '"Action"',
    ]

    sign_in(page, base_url, SECRETARY, PASSWORD)  # on a laptop, the same rows stay a table
    assert set(_labels(page.locator("table.deliveries tbody tr").first)) == {"none"}
    expect(page.locator("table.deliveries thead").first).to_be_visible()
