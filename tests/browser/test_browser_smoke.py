"""The browser-test machinery itself: Chromium, the live server and pages, without the UI."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, Route, expect
from sqlalchemy.orm import Session

from clubwire.settings import Settings
from tests.browser import helpers
from tests.browser.live_server import StartServer
from tests.conftest import PLATFORM_TOKEN
from tests.factories import make_club, make_endpoint, registration
from tests.receiver import Authority, Receiver

pytestmark = pytest.mark.browser

FAKE_SITE = "http://clubwire.test"
SIGN_IN_FORM = """<form method="post" action="/sign-in">
<label>Email <input name="email" type="email"></label>
<label>Password <input name="password" type="password"></label>
<button>Sign in</button></form>"""
PHONE_META = '<meta name="viewport" content="width=device-width, initial-scale=1">'


def test_the_browser_reads_the_service_document(live_server: str, page: Page) -> None:
    response = page.goto(f"{live_server}/openapi.json")

    assert response is not None
    assert response.status == 200
    expect(page.locator("body")).to_contain_text('"openapi"')


def test_the_browser_shows_the_problem_without_a_key(live_server: str, page: Page) -> None:
    response = page.goto(f"{live_server}/clubs/granite/api/v1/programs")

    assert response is not None
    assert response.status == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    expect(page.locator("body")).to_contain_text('"status":401')
    expect(page.locator("body")).to_contain_text('"code":"invalid_token"')


def test_a_phone_page_is_a_phone(phone_page: Page) -> None:
    phone_page.set_content(f"<html><head>{PHONE_META}</head><body><p>Granite</p></body></html>")

    helpers.assert_fits_a_phone(phone_page)
    assert phone_page.evaluate("window.devicePixelRatio") == 2
    assert phone_page.evaluate("matchMedia('(pointer: coarse)').matches")


def test_the_phone_check_catches_a_page_without_the_viewport_meta(phone_page: Page) -> None:
    phone_page.set_content("<html><body><p>Granite</p></body></html>")

    with pytest.raises(AssertionError, match="laid out at 980 px"):
        helpers.assert_fits_a_phone(phone_page)


def test_the_phone_check_catches_a_page_wider_than_the_screen(phone_page: Page) -> None:
    wide = '<div style="width: 600px">Granite</div>'
    phone_page.set_content(f"<html><head>{PHONE_META}</head><body>{wide}</body></html>")

    with pytest.raises(AssertionError, match="scrolls sideways"):
        helpers.assert_fits_a_phone(phone_page)


def test_sign_in_fills_the_form_and_sends_it(page: Page) -> None:
    posted: list[str | None] = []

    def answer(route: Route) -> None:
        """A stand-in site (Playwright does not route the request after a fulfilled redirect,
        so the form's answer is the next page itself)."""
        if route.request.method == "POST":
            posted.append(route.request.post_data)
            route.fulfill(body="<h1>Settings</h1>", content_type="text/html")
        else:
            route.fulfill(body=SIGN_IN_FORM, content_type="text/html")

    page.route(f"{FAKE_SITE}/**", answer)

    helpers.sign_in(page, FAKE_SITE, "skip@granite.example", "pebble-pebble-42")

    assert posted == ["email=skip%40granite.example&password=pebble-pebble-42"]
    expect(page.get_by_role("heading", name="Settings")).to_be_visible()


def test_screenshots_stay_out_of_the_tree_by_default(
    page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLUBWIRE_SCREENSHOTS", raising=False)
    page.set_content("<p>Granite</p>")

    assert helpers.screenshot(page, "smoke") is None
    assert not (helpers.SCREENSHOTS / "smoke.png").exists()


def test_screenshots_go_to_the_docs_when_asked(
    page: Page, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLUBWIRE_SCREENSHOTS", "1")
    monkeypatch.setattr(helpers, "SCREENSHOTS", tmp_path / "screenshots")
    page.set_content("<p>Granite</p>")

    path = helpers.screenshot(page, "smoke")

    assert path == tmp_path / "screenshots" / "smoke.png"
    assert path.read_bytes().startswith(b"\x89PNG")


@pytest.mark.sqlite_only
def test_the_live_server_delivers_to_a_local_receiver(
    start_server: StartServer,
    tls: Authority,
    receiver: Receiver,
    settings: Settings,
    session: Session,
    page: Page,
) -> None:
    club = make_club(session)
    make_endpoint(session, club, settings, url=receiver.url)
    session.commit()
    base_url = start_server(ca_bundle=tls.bundle)

    response = page.request.post(
        f"{base_url}/internal/v1/clubs/{club.slug}/events",
        headers={"Authorization": f"Bearer {PLATFORM_TOKEN}"},
        data={"event": "registration.created", "data": registration()},
    )

    assert response.status == 201
    [delivery] = receiver.wait_for(1)
    assert delivery.headers["X-Service-Event"] == "registration.created"
