"""Secrets in a real browser: an API key and a signing secret (new, then rotated) are on the
one page the form's redirect leads to, sent ``no-store``, and on no page after it, not even
by going Back; a reload, Back or Forward repeats no action (Post/Redirect/Get, ADR 0014)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, Response, expect
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import sealing
from clubwire.services import clubs
from clubwire.services.club_api import keys
from clubwire.settings import Settings
from clubwire.storage.models import Endpoint
from tests.browser.helpers import screenshot, sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD, make_club, make_staff

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
    """Submit the form; the secret the page it leads to shows, after checking that the form
    was answered with a redirect, and that page sent ``no-store``."""
    with (
        page.expect_response(lambda response: response.request.method == "POST") as posted,
        page.expect_response(_a_page) as loaded,
    ):
        submit.click()
    assert posted.value.status == 303
    assert loaded.value.headers["cache-control"] == "no-store"
    expect(page.locator(f"code#{shown}")).to_be_visible()
    expect(page.locator(f"code#{shown}")).to_have_count(1)
    return page.locator(f"code#{shown}").inner_text()


def _a_page(response: Response) -> bool:
    return response.request.method == "GET" and response.request.resource_type == "document"


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
    screenshot(page, "api-key-created")  # the README's picture of a flash and a key shown once

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
    # loads the page again, without the key (its flash is spent) and creating nothing.
    page.goto(f"{base_url}{CLUB}/api-keys")
    page.locator("#key-name").fill("Second")
    second = _shown_once(page, page.get_by_role("button", name="Create key"), "new-key")
    page.locator("#tab-webhooks").click()
    expect(page.locator("#tab-webhooks")).to_have_attribute("aria-current", "page")
    page.go_back()
    expect(page).to_have_url(f"{base_url}{CLUB}/api-keys")
    expect(page.locator("#keys tbody tr")).to_have_count(2)
    expect(page.locator("section.secret")).to_have_count(0)
    assert second not in page.content()
    page.go_forward()
    expect(page.locator("#tab-webhooks")).to_have_attribute("aria-current", "page")
    assert second not in page.content()
    with sessions() as session:
        listed = keys.list_keys(session, clubs.get_club(session, "granite").id)
        assert sorted(key.name for key in listed) == ["Club website", "Second"]


def test_a_reload_after_each_form_repeats_nothing(
    base_url: str, page: Page, sessions: sessionmaker[Session], settings: Settings
) -> None:
    sign_in(page, base_url, ROOT, PASSWORD)
    page.goto(f"{base_url}{CLUB}/webhooks")
    page.locator("#new-endpoint-url").fill("https://127.0.0.1:9/hooks")
    page.locator("#new-endpoint-events-game-updated").check()
    _shown_once(page, page.get_by_role("button", name="Add endpoint"), "new-secret")
    page.reload()
    expect(page.locator("article.endpoint")).to_have_count(1)
    expect(page.locator("section.secret")).to_have_count(0)

    page.locator("article.endpoint").get_by_role("button", name=re.compile("^Rotate")).click()
    rotated = _shown_once(
        page, page.get_by_role("button", name="Rotate secret", exact=True), "new-secret"
    )
    page.reload()
    expect(page.locator("#flashes p")).to_have_count(0)
    assert rotated not in page.content()
    with sessions() as session:
        (sealed,) = session.scalars(select(Endpoint.secret_sealed)).all()
    assert sealing.Sealer(settings.secret_key_value()).open(sealed) == rotated  # still the one

    page.locator("#tab-api-keys").click()
    page.locator("#key-name").fill("Club website")
    key = _shown_once(page, page.get_by_role("button", name="Create key"), "new-key")
    page.reload()
    expect(page.locator("#keys tbody tr")).to_have_count(1)
    expect(page.locator("section.secret")).to_have_count(0)
    assert key not in page.content()
