"""The API keys tab in a real browser: a key created with chosen scopes and an expiry, shown
once with a copy button and a warning, used against the live API, listed, and revoked after a
confirmation. On SQLite and PostgreSQL."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from tests.browser.helpers import sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD, make_club, make_program, make_staff

pytestmark = pytest.mark.browser

ADMIN = "secretary@granite.example"
KEY = re.compile(r"cw_live_([0-9A-Za-z]{10})_[0-9A-Za-z]{38}")
MOMENT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


@pytest.fixture
def base_url(sessions: sessionmaker[Session], start_server: StartServer) -> str:
    with sessions.begin() as session:
        make_program(session, make_club(session, "granite", name="Granite Curling Club"))
    make_staff(sessions, ADMIN, clubs=["granite"])
    return start_server()


def _programs(page: Page, base_url: str, key: str) -> int:
    """The status the live club data API answers the key with."""
    response = page.request.get(
        f"{base_url}/clubs/granite/api/v1/programs", headers={"Authorization": f"Bearer {key}"}
    )
    return response.status


def test_a_key_is_created_shown_once_used_and_revoked(base_url: str, page: Page) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
    sign_in(page, base_url, ADMIN, PASSWORD)
    page.locator("#tab-api-keys").click()
    expect(page.locator("#tab-api-keys")).to_have_attribute("aria-current", "page")
    expect(page.locator("#key-scopes-read-programs")).to_be_checked()

    page.locator("#key-name").fill("Club website")
    page.locator("#key-scopes-read-games").check()
    expect(page.locator("#key-expires")).to_have_value("never")
    page.get_by_label("Expires").select_option(label="In 90 days")
    page.get_by_role("button", name="Create key").click()

    shown = page.locator("code#new-key")
    expect(shown).to_have_text(KEY)
    key = shown.inner_text()
    found = KEY.fullmatch(key)
    assert found is not None
    prefix = found.group(1)
    panel = page.locator("section.secret")
    expect(panel.locator(".warning")).to_contain_text("Copy it now.")
    expect(panel.locator(".warning")).to_contain_text("the only time the whole key is shown")
    panel.get_by_role("button", name="Copy").click()
    expect(panel.get_by_role("status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == key

    row = page.locator(f"#key-{prefix}")
    expect(row.locator("th")).to_have_text(prefix)
    expect(row.locator("td")).to_have_text(
        [
            "Club website",
            "read:programs, read:games",
            "never",
            re.compile(f"^{MOMENT}$"),
            "active",
            re.compile("Revoke"),
        ]
    )
    expires = row.locator("td").nth(3).locator("time").get_attribute("datetime")
    assert expires is not None
    created = datetime.fromisoformat(expires) - timedelta(days=90)
    assert abs(datetime.now(UTC) - created) < timedelta(minutes=5)

    # Used against the live API: it reads, and the list says when it was last used.
    assert _programs(page, base_url, key) == 200
    page.locator("#tab-api-keys").click()
    expect(row.locator("td").nth(2)).to_have_text(re.compile(f"^{MOMENT}"))
    expect(page.locator("code#new-key")).to_have_count(0)
    assert key not in page.content()

    # Revoke: a question first; Cancel leaves the key alone.
    row.get_by_role("button", name="Revoke").click()
    expect(
        page.get_by_role("heading", name=re.compile(f"Revoke the API key {prefix}"))
    ).to_be_visible()
    expect(page.locator(".confirm .warning")).to_contain_text("stop working at once")
    page.get_by_role("link", name="Cancel").click()
    expect(row.locator("td").nth(4)).to_have_text("active")
    assert _programs(page, base_url, key) == 200
    row.get_by_role("button", name="Revoke").click()
    page.get_by_role("button", name="Revoke key").click()

    expect(page).to_have_url(f"{base_url}/settings/granite/api-keys#key-{prefix}")
    expect(row.locator("td").nth(4)).to_have_text("revoked")
    expect(row.locator("td").nth(5)).to_have_text(re.compile(r"^Revoked \d{4}-"))
    expect(row.get_by_role("button", name="Revoke")).to_have_count(0)
    assert _programs(page, base_url, key) == 401
    assert key not in page.content()
