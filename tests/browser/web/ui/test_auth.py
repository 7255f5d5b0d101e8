"""Signing in and out in a real browser: with the keyboard alone, the session cookie, the
way back after signing in again, a wrong password said beside the field, throttling."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Cookie, Page, expect
from sqlalchemy.orm import Session, sessionmaker

from tests.browser.helpers import granite_with_staff
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ADMIN = "skip@granite.example"
TAB = "/settings/granite/webhooks"


@pytest.fixture
def base_url(sessions: sessionmaker[Session], start_server: StartServer) -> str:
    granite_with_staff(sessions, ADMIN)
    return start_server()


def _focused(page: Page) -> str:
    """The focused element: its id, or else its text."""
    found: str = page.evaluate(
        "document.activeElement.id || document.activeElement.textContent.trim()"
    )
    return found


def _session_cookie(page: Page) -> Cookie | None:
    found = [c for c in page.context.cookies() if c.get("name") == "clubwire_session"]
    return found[0] if found else None


def test_signing_in_with_tab_and_enter_alone_then_out_and_back(base_url: str, page: Page) -> None:
    page.goto(f"{base_url}/sign-in")

    order = []
    for _ in range(3):
        page.keyboard.press("Tab")
        order.append(_focused(page))
    page.keyboard.type(ADMIN)
    page.keyboard.press("Tab")
    order.append(_focused(page))
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")

    assert order == ["Skip to the content", "clubwire", "email", "password"]
    expect(page).to_have_url(f"{base_url}{TAB}")
    expect(page.get_by_role("heading", name="Webhooks & API")).to_be_visible()
    cookie = _session_cookie(page)
    assert cookie is not None
    assert (cookie.get("httpOnly"), cookie.get("sameSite"), cookie.get("secure")) == (
        True,
        "Lax",
        False,
    )

    # Sign out: the cookie goes, and the session ended on the server (the old cookie, put
    # back, no longer lets anyone in).
    page.locator("#tab-api-keys").click()
    expect(page.locator("#tab-api-keys")).to_have_attribute("aria-current", "page")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{base_url}/sign-in")
    assert _session_cookie(page) is None
    old = cookie.get("value", "")
    page.context.add_cookies([{"name": "clubwire_session", "value": old, "url": base_url}])
    page.goto(f"{base_url}/settings/granite/api-keys")
    expect(page).to_have_url(re.compile(r"/sign-in\?next=/settings/granite/api-keys$"))

    # Signing in again goes back where the user was going, with a new session.
    page.get_by_label("Email", exact=True).fill(ADMIN)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{base_url}/settings/granite/api-keys")
    expect(page.locator("#tab-api-keys")).to_have_attribute("aria-current", "page")
    again = _session_cookie(page)
    assert again is not None
    assert again.get("value") not in ("", old)


def test_a_wrong_password_is_said_beside_the_field_then_throttled(
    base_url: str, page: Page
) -> None:
    page.goto(f"{base_url}/sign-in")
    email, password = page.get_by_label("Email", exact=True), page.get_by_label("Password")

    for _ in range(5):
        email.fill(ADMIN)
        password.fill("not the password at all")
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#password-error")).to_contain_text(
            "The email or the password is not right."
        )
        expect(email).to_have_value(ADMIN)
        expect(password).to_have_attribute("aria-invalid", "true")
    password.fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    expect(page.locator("#password-error")).to_contain_text("Too many failed sign-ins")
    expect(page).to_have_url(f"{base_url}/sign-in")
    page.goto(f"{base_url}{TAB}")
    expect(page).to_have_url(re.compile(r"/sign-in\?next="))
