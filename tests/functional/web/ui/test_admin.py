"""The superadmin page: every club and its Webhooks & API module switch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs
from clubwire.settings import Settings
from tests.factories import make_club, make_staff
from tests.functional.ui_pages import Browser, browser, part

ROOT = "root@clubwire.example"
ADMIN = "admin@granite.example"


@pytest.fixture
def web(settings: Settings, sessions: sessionmaker[Session]) -> Iterator[Browser]:
    with sessions.begin() as session:
        make_club(session, "granite", enabled=False)
        make_club(session, "rocks", enabled=True, name="Rocks & Stones")
    make_staff(sessions, ROOT, superadmin=True)
    make_staff(sessions, ADMIN, clubs=["granite"])
    with browser(settings) as web:
        yield web


def _enabled(sessions: sessionmaker[Session], slug: str) -> bool:
    with sessions() as session:
        return clubs.get_club(session, slug).webhooks_enabled


def test_the_page_lists_every_club_with_its_module(web: Browser) -> None:
    web.sign_in(ROOT)
    page = web.get("/admin")
    assert page.status_code == 200
    assert "<h1>Superadmin: clubs</h1>" in page.text
    granite = part(page.text, 'id="club-granite"')
    rocks = part(page.text, 'id="club-rocks"')
    assert ">Off<" in granite
    assert "Switch on" in granite
    assert ">On<" in rocks
    assert "Rocks &amp; Stones" in rocks
    assert "Switch off" in rocks


def test_a_superadmin_switches_the_module_on_and_off(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.sign_in(ROOT)
    web.get("/admin")
    response = web.post("/admin/clubs/granite/webhooks", {"enabled": "on"})
    assert response.status_code == 303
    assert response.headers["location"] == "/admin#club-granite"
    assert _enabled(sessions, "granite")
    web.post("/admin/clubs/granite/webhooks", {"enabled": "on"})  # a second click: no change
    assert _enabled(sessions, "granite")
    web.post("/admin/clubs/granite/webhooks", {"enabled": "off"})
    assert not _enabled(sessions, "granite")


def test_an_unknown_club_or_state_changes_nothing(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.sign_in(ROOT)
    web.get("/admin")
    assert web.post("/admin/clubs/nowhere/webhooks", {"enabled": "on"}).status_code == 404
    assert web.post("/admin/clubs/granite/webhooks", {"enabled": "maybe"}).status_code == 422
    assert not _enabled(sessions, "granite")


def test_club_admins_are_told_there_is_no_such_page(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.sign_in(ADMIN)
    assert web.get("/admin").status_code == 404
    assert web.post("/admin/clubs/granite/webhooks", {"enabled": "on"}).status_code == 404
    assert not _enabled(sessions, "granite")
    assert 'href="/admin"' not in web.get("/settings/granite/webhooks").text


def _payload_days(sessions: sessionmaker[Session], slug: str) -> int | None:
    with sessions() as session:
        return clubs.get_club(session, slug).payload_days


def test_a_superadmin_sets_and_clears_the_payload_days(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.sign_in(ROOT)
    page = web.get("/admin")
    assert 'id="payload-days-granite"' in part(page.text, 'id="club-granite"')
    response = web.post("/admin/clubs/granite/payload-days", {"payload_days": " 7 "})
    assert (response.status_code, response.headers["location"]) == (303, "/admin#club-granite")
    assert _payload_days(sessions, "granite") == 7
    page = web.get("/admin")
    assert "Payloads of Granite Curling Club are now kept for 7 days." in page.text
    assert 'value="7"' in part(page.text, 'id="club-granite"')
    web.post("/admin/clubs/granite/payload-days", {"payload_days": ""})
    assert _payload_days(sessions, "granite") is None
    assert "kept as long as the history (30 days)." in web.get("/admin").text


@pytest.mark.parametrize("typed", ["0", "31", "-1", "seven", "7.5", "1" * 50, "٣"])
def test_payload_days_that_cannot_be_are_shown_again_with_the_rule(
    web: Browser, sessions: sessionmaker[Session], typed: str
) -> None:
    web.sign_in(ROOT)
    web.get("/admin")
    web.post("/admin/clubs/granite/payload-days", {"payload_days": "5"})
    page = web.post("/admin/clubs/granite/payload-days", {"payload_days": typed})
    assert page.status_code == 422
    granite = part(page.text, 'id="club-granite"')
    assert "Payload days must be a whole number from 1 to 30" in granite
    assert 'aria-invalid="true"' in granite
    assert f'value="{typed}"' in granite
    assert "aria-invalid" not in part(page.text, 'id="club-rocks"')
    assert _payload_days(sessions, "granite") == 5


def test_club_admins_cannot_set_payload_days(web: Browser, sessions: sessionmaker[Session]) -> None:
    web.sign_in(ADMIN)
    web.get("/settings/granite/webhooks")
    response = web.post("/admin/clubs/granite/payload-days", {"payload_days": "3"})
    assert response.status_code == 404
    assert _payload_days(sessions, "granite") is None
