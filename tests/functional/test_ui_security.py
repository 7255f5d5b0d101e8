"""Browser safety of the settings area: CSRF, security headers, no-store, no inline code."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs, events
from clubwire.settings import Settings
from clubwire.storage.models import ApiKey, Club, Delivery, Endpoint, WebSession
from tests.factories import EPOCH, make_club, make_endpoint, make_key, receiver_settings
from tests.factories import registration as registration_data
from tests.functional.ui_pages import Browser, browser, make_staff

ROOT = "root@clubwire.example"
CLUB = "/settings/granite"


@dataclass(frozen=True)
class Seeded:
    endpoint_id: str
    delivery_id: str
    prefix: str


@pytest.fixture
def hooks(settings: Settings) -> Settings:
    return receiver_settings(settings)


@pytest.fixture
def seeded(hooks: Settings, sessions: sessionmaker[Session]) -> Seeded:
    with sessions.begin() as session:
        club = make_club(session, "granite")
        make_club(session, "quiet", enabled=False)
        endpoint, _ = make_endpoint(session, club, hooks)
        key, _ = make_key(session, club)
        events.publish(session, club, "registration.created", registration_data(), EPOCH)
        delivery_id = session.scalars(select(Delivery.id)).one()
        seeded = Seeded(endpoint.id, delivery_id, key.prefix)
    make_staff(sessions, ROOT, superadmin=True)
    return seeded


@pytest.fixture
def web(hooks: Settings, seeded: Seeded) -> Iterator[Browser]:
    with browser(hooks) as web:
        web.sign_in(ROOT)
        yield web


def _pages(seeded: Seeded) -> list[str]:
    endpoint = f"{CLUB}/webhooks/{seeded.endpoint_id}"
    return [
        "/admin",
        "/settings",
        f"{CLUB}/webhooks",
        f"{CLUB}/api-keys",
        f"{CLUB}/api-keys/{seeded.prefix}/revoke",
        f"{endpoint}/edit",
        f"{endpoint}/delete",
        f"{endpoint}/rotate",
        f"{CLUB}/deliveries/{seeded.delivery_id}",
        "/settings/quiet/webhooks",
        f"{CLUB}/deliveries/dlv_unknown",
    ]


def _posts(seeded: Seeded) -> list[tuple[str, dict[str, str | list[str]]]]:
    endpoint = f"{CLUB}/webhooks/{seeded.endpoint_id}"
    return [
        (f"{CLUB}/api-keys", {"name": "x", "scope": ["read:programs"]}),
        (f"{CLUB}/api-keys/{seeded.prefix}/revoke", {}),
        (f"{CLUB}/webhooks", {"url": "https://127.0.0.1:9/x", "event": ["game.updated"]}),
        (f"{endpoint}/edit", {"url": "https://127.0.0.1:9/x", "event": ["game.updated"]}),
        (f"{endpoint}/delete", {}),
        (f"{endpoint}/rotate", {}),
        (f"{endpoint}/disable", {}),
        (f"{endpoint}/test", {}),
        (f"{CLUB}/deliveries/{seeded.delivery_id}/retry", {}),
        ("/admin/clubs/quiet/webhooks", {"enabled": "on"}),
        ("/sign-out", {}),
    ]


def _snapshot(sessions: sessionmaker[Session]) -> tuple[object, ...]:
    """Everything a refused POST could have changed."""
    with sessions() as session:
        return (
            [(k.name, k.revoked_at) for k in session.scalars(select(ApiKey))],
            [
                (e.url, e.events, e.enabled, e.secret_sealed)
                for e in session.scalars(select(Endpoint))
            ],
            [
                (d.status, d.next_attempt_at, d.next_trigger)
                for d in session.scalars(select(Delivery))
            ],
            [(c.slug, c.webhooks_enabled) for c in session.scalars(select(Club))],
            session.scalar(select(func.count()).select_from(WebSession)),
        )


@pytest.mark.parametrize("token", [None, "", "forged-token"])
def test_posts_without_the_sessions_csrf_token_are_refused_and_change_nothing(
    web: Browser, seeded: Seeded, sessions: sessionmaker[Session], token: str | None
) -> None:
    before = _snapshot(sessions)
    for url, data in _posts(seeded):
        response = web.client.post(url, data=data) if token is None else web.post(url, data, token)
        assert response.status_code == 403, url
        assert "Form refused" in response.text
        assert "nothing was changed" in response.text
    assert _snapshot(sessions) == before


def test_a_token_of_another_session_is_refused(
    hooks: Settings, web: Browser, seeded: Seeded, sessions: sessionmaker[Session]
) -> None:
    with browser(hooks) as other:
        other.sign_in(ROOT)
        stolen = other.token
    before = _snapshot(sessions)
    response = web.post(f"{CLUB}/api-keys", {"name": "x", "scope": ["read:programs"]}, stolen)
    assert response.status_code == 403
    assert _snapshot(sessions) == before


def test_posts_without_a_session_go_to_sign_in_and_change_nothing(
    hooks: Settings, seeded: Seeded, sessions: sessionmaker[Session]
) -> None:
    before = _snapshot(sessions)
    with browser(hooks) as anonymous:
        for url, data in _posts(seeded):
            response = anonymous.post(url, data, token="anything")
            assert (response.status_code, response.headers["location"]) == (303, "/sign-in")
    assert _snapshot(sessions) == before


HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def test_every_page_carries_the_security_headers_and_no_store(
    hooks: Settings, web: Browser, seeded: Seeded
) -> None:
    pages = [web.get(url) for url in _pages(seeded)]
    pages.append(web.post(f"{CLUB}/api-keys", {"name": "k", "scope": ["read:programs"]}))
    pages.append(web.post(f"{CLUB}/webhooks", {"url": "https://127.0.0.1:9/y", "event": ["ping"]}))
    pages.append(web.post(f"{CLUB}/webhooks/{seeded.endpoint_id}/rotate"))
    with browser(hooks) as anonymous:
        pages += [anonymous.get("/sign-in"), anonymous.get("/"), anonymous.post("/sign-in", {})]
    for page in pages:
        for name, value in HEADERS.items():
            assert page.headers[name] == value, (page.url, name)


def test_pages_have_no_inline_scripts_or_styles(web: Browser, seeded: Seeded) -> None:
    for url in _pages(seeded):
        html = web.get(url).text
        assert "<style" not in html
        assert " style=" not in html
        assert re.findall(r"<script(?![^>]*\bsrc=)", html) == []
        assert re.search(r"\son[a-z]+=", html) is None, url


def test_static_files_are_served_with_the_security_headers(web: Browser) -> None:
    for name, kind in [
        ("htmx.min.js", "javascript"),
        ("clubwire.js", "javascript"),
        ("clubwire.css", "text/css"),
    ]:
        response = web.get(f"/static/{name}")
        assert response.status_code == 200
        assert kind in response.headers["content-type"]
        assert response.headers["x-content-type-options"] == "nosniff"


def test_the_club_data_api_is_left_alone(web: Browser, sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        _, key = make_key(session, clubs.get_club(session, "granite"))
    response = web.client.get(
        "/clubs/granite/api/v1/programs", headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 200
    assert "content-security-policy" not in response.headers
    assert response.headers["cache-control"] == "private, no-cache"  # the API's, not no-store
