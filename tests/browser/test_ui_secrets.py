"""Secrets in a real browser: an API key and a signing secret (new, then rotated) are on the
one page that answers the form, sent ``no-store``, and on no page after it, not even by
going Back."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Error, Locator, Page, expect
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs, keys
from tests.browser.helpers import sign_in
from tests.browser.live_server import StartServer
from tests.factories import make_club
from tests.functional.ui_pages import PASSWORD, make_staff

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ROOT = "root@clubwire.example"
CLUB = "/settings/granite"
KEY = re.compile(r"^cw_live_([0-9A-Za-z]+)_([0-9A-Za-z]+)$")
SECRET = re.compile(r"^whsec_[0-9A-Za-z]+$")


@pytest.fixture
def base_url(sessions: sessionmaker[Session], start_server: StartServer) -> str:
    with sessions.begin() as session:
        make_club(session, "granite", name="Granite Curling Club")
    make_staff(sessions, ROOT, superadmin=True)
    return start_server()


def _shown_once(page: Page, submit: Locator, shown: str) -> str:
    """Submit the form; the secret it shows, after checking that the answer is ``no-store``."""
    with page.expect_response(lambda response: response.request.method == "POST") as posted:
        submit.click()
    assert posted.value.headers["cache-control"] == "no-store"
    expect(page.locator(f"code#{shown}")).to_be_visible()
    expect(page.locator(f"code#{shown}")).to_have_count(1)
    return page.locator(f"code#{shown}").inner_text()


def test_a_key_and_signing_secrets_are_shown_once_and_never_again(
    base_url: str, page: Page, sessions: sessionmaker[Session]
) -> None:
    sign_in(page, base_url, ROOT, PASSWORD)
    page.goto(f"{base_url}{CLUB}/webhooks")
    page.locator("#new-endpoint-url").fill("https://127.0.0.1:9/hooks")
    page.locator("#new-endpoint-events-game-updated").check()
    secret = _shown_once(page, page.get_by_role("button", name="Add endpoint"), "new-secret")
    endpoint = (page.locator("article.endpoint").get_attribute("id") or "").removeprefix(
        "endpoint-"
    )
    page.locator("article.endpoint").get_by_role("button", name=re.compile("^Rotate")).click()
    rotated = _shown_once(
        page, page.get_by_role("button", name="Rotate secret", exact=True), "new-secret"
    )
    page.locator("#tab-api-keys").click()
    page.locator("#key-name").fill("Club website")
    key = _shown_once(page, page.get_by_role("button", name="Create key"), "new-key")

    assert SECRET.match(secret)
    assert SECRET.match(rotated)
    assert rotated != secret
    found = KEY.match(key)
    assert found is not None
    prefix, key_secret = found.groups()
    shown_once = [secret, rotated, key, key_secret]
    for path in (
        f"{CLUB}/api-keys",
        f"{CLUB}/api-keys/{prefix}/revoke",
        f"{CLUB}/webhooks",
        f"{CLUB}/webhooks/{endpoint}/edit",
        f"{CLUB}/webhooks/{endpoint}/rotate",
        f"{CLUB}/webhooks/{endpoint}/delete",
        "/settings",
        "/admin",
    ):
        page.goto(f"{base_url}{path}")
        html = page.content()
        assert [value for value in shown_once if value in html] == [], path
        expect(page.locator("section.secret")).to_have_count(0)

    # Back to the page that showed the key: the browser kept no copy to show (no-store), and
    # asks before sending the form again rather than doing it.
    page.goto(f"{base_url}{CLUB}/api-keys")
    page.locator("#key-name").fill("Second")
    second = _shown_once(page, page.get_by_role("button", name="Create key"), "new-key")
    page.locator("#tab-webhooks").click()
    expect(page.locator("#tab-webhooks")).to_have_attribute("aria-current", "page")
    with pytest.raises(Error, match="ERR_CACHE_MISS"):
        page.go_back()
    expect(page).to_have_url(re.compile(r"^chrome-error://"))  # Chromium's own error page
    assert second not in page.content()
    with sessions() as session:
        listed = keys.list_keys(session, clubs.get_club(session, "granite").id)
        assert sorted(key.name for key in listed) == ["Club website", "Second"]
