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
