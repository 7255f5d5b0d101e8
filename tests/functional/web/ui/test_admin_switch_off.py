"""The superadmin's Switch off asks first, saying what stops and what is kept; its answer
switches the module off and redirects (issue 15, item 4). Switching on asks nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Status
from clubwire.services import clubs
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import ApiKey, Delivery, Endpoint
from tests.factories import EPOCH, make_club, make_endpoint, make_key, make_staff, registration
from tests.functional.ui_pages import Browser, browser, part

ROOT = "root@clubwire.example"
ADMIN = "admin@rocks.example"
CONFIRM = "/admin/clubs/rocks/webhooks/off"


@pytest.fixture
def web(settings: Settings, sessions: sessionmaker[Session]) -> Iterator[Browser]:
    """Rocks, on, with a key, an endpoint and a delivery waiting; Granite, off."""
    with sessions.begin() as session:
        make_club(session, "granite", enabled=False)
        rocks = make_club(session, "rocks", enabled=True, name="Rocks & Stones")
        make_key(session, rocks)
        make_endpoint(session, rocks, settings)
        events.publish(session, rocks, "registration.created", registration(), EPOCH)
    make_staff(sessions, ROOT, superadmin=True)
    make_staff(sessions, ADMIN, clubs=["rocks"])
    with browser(settings) as web:
        yield web


def _state(sessions: sessionmaker[Session]) -> tuple[bool, int, int, list[str]]:
    """Whether Rocks's module is on, its keys, its endpoints, its deliveries' statuses."""
    with sessions() as session:
        return (
            clubs.get_club(session, "rocks").webhooks_enabled,
            session.scalar(select(func.count()).select_from(ApiKey)) or 0,
            session.scalar(select(func.count()).select_from(Endpoint)) or 0,
            list(session.scalars(select(Delivery.status))),
        )


def test_switch_off_on_the_admin_page_leads_to_a_question_and_switch_on_does_not(
    web: Browser,
) -> None:
    web.sign_in(ROOT)
    page = web.get("/admin").text
    rocks, granite = part(page, 'id="club-rocks"'), part(page, 'id="club-granite"')
    assert re.search(rf'<form class="inline" method="get" action="{CONFIRM}">', rocks)
    assert 'name="enabled" value="off"' not in rocks
    assert re.search(
        r'<form class="inline" method="post" action="/admin/clubs/granite/webhooks">', granite
    )
    assert 'name="enabled" value="on"' in granite


def test_the_question_says_what_stops_and_what_is_kept_and_changes_nothing(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.sign_in(ROOT)
    before = _state(sessions)
    page = web.get(CONFIRM)
    assert page.status_code == 200
    assert "Switch off Webhooks &amp; API for Rocks &amp; Stones?" in page.text
    stops = part(page.text, 'id="what-stops"', "</p>")
    assert "API answers 401" in stops
    assert "skipped" in stops
    kept = part(page.text, 'id="what-is-kept"', "</p>")
    assert all(word in kept for word in ("API keys", "endpoints", "history"))
    form = part(page.text, '<form method="post" action="/admin/clubs/rocks/webhooks">', "</form>")
    assert 'name="csrf_token"' in form
    assert '<input type="hidden" name="enabled" value="off">' in form
    assert 'href="/admin#club-rocks">Cancel</a>' in form
    assert _state(sessions) == before == (True, 1, 1, [Status.PENDING])


def test_answering_the_question_switches_off_and_redirects_keeping_keys_and_endpoints(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.sign_in(ROOT)
    web.get(CONFIRM)  # the token of the question's form
    response = web.post("/admin/clubs/rocks/webhooks", {"enabled": "off"})
    assert (response.status_code, response.headers["location"]) == (303, "/admin#club-rocks")
    assert _state(sessions) == (False, 1, 1, [Status.SKIPPED])
    assert ">Off<" in part(web.get("/admin").text, 'id="club-rocks"')


@pytest.mark.parametrize("token", ["", "forged-token"])
def test_an_answer_without_the_sessions_csrf_token_is_refused(
    web: Browser, sessions: sessionmaker[Session], token: str
) -> None:
    web.sign_in(ROOT)
    web.get(CONFIRM)
    before = _state(sessions)
    response = web.post("/admin/clubs/rocks/webhooks", {"enabled": "off"}, token)
    assert response.status_code == 403
    assert _state(sessions) == before


def test_only_a_superadmin_is_asked_and_only_about_a_club_that_exists(
    web: Browser, settings: Settings
) -> None:
    web.sign_in(ROOT)
    assert web.get("/admin/clubs/nowhere/webhooks/off").status_code == 404
    with browser(settings) as admin:
        admin.sign_in(ADMIN)
        assert admin.get(CONFIRM).status_code == 404
