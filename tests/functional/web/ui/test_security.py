"""Browser safety of the settings area: CSRF, security headers, no-store, no inline code."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest
from fastapi.routing import APIRoute
from httpx2 import Response
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import ApiKey, Club, ClubAdmin, Delivery, Endpoint, WebSession
from clubwire.web.app import create_app
from clubwire.web.ui import security, urls
from tests.factories import (
    EPOCH,
    PASSWORD,
    make_club,
    make_endpoint,
    make_key,
    make_staff,
    receiver_settings,
)
from tests.factories import registration as registration_data
from tests.functional.ui_pages import Browser, browser
from tests.logcapture import capturing

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
    make_staff(sessions, ROOT, superadmin=True, clubs=["granite"])
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


WINDOW = {"since": "2025-12-31T00:00", "until": "2026-01-02T00:00", "status": "dead"}
CONFIRMED = {**WINDOW, "confirmation": "a-confirmation-token-1"}  # as a preview's token reads


def _posts(seeded: Seeded) -> list[tuple[str, Mapping[str, str | list[str]]]]:
    """A POST to every route of the settings area that changes something but signing in
    (sign-out last: it ends the session)."""
    endpoint = f"{CLUB}/webhooks/{seeded.endpoint_id}"
    return [
        (f"{CLUB}/api-keys", {"name": "x", "scope": ["read:programs"]}),
        (f"{CLUB}/api-keys/{seeded.prefix}/revoke", {}),
        (f"{CLUB}/webhooks", {"url": "https://127.0.0.1:9/x", "event": ["game.updated"]}),
        (f"{endpoint}/edit", {"url": "https://127.0.0.1:9/x", "event": ["game.updated"]}),
        (f"{endpoint}/replay/preview", WINDOW),
        (f"{endpoint}/replay", CONFIRMED),
        (f"{endpoint}/rotate", {}),
        (f"{endpoint}/disable", {}),
        (f"{endpoint}/enable", {}),
        (f"{endpoint}/test", {}),
        (f"{CLUB}/deliveries/{seeded.delivery_id}/retry", {}),
        (f"{CLUB}/failure-emails", {"wanted": "no"}),
        ("/admin/clubs/quiet/webhooks", {"enabled": "on"}),
        (f"{endpoint}/delete", {}),
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
            [(a.club_id, a.failure_emails) for a in session.scalars(select(ClubAdmin))],
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


# -- requests from other sites (issue 31) ------------------------------------------------------

OWN = "http://testserver"  # the test client's origin
FROM_ELSEWHERE: list[dict[str, str]] = [
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},  # a sibling host (a club's host) shares the site, not us
    {"Sec-Fetch-Site": "cross-site", "Origin": OWN},
    {"Sec-Fetch-Site": "same-origin", "Origin": "https://evil.example"},
    {"Origin": "https://evil.example"},
    {"Origin": "null"},  # a sandboxed frame, a data: URL
    {"Origin": "http://testserver.evil.example"},
    {"Origin": "https://testserver"},  # another scheme is another origin
    {"Origin": "http://testserver:8080"},
    {"Origin": "http://granite.testserver"},
]
CROSS_SITE_WORDS = "sent from another website, so nothing was changed"


def _every_post(
    web: Browser, seeded: Seeded, headers: Mapping[str, str]
) -> Iterator[tuple[str, Response]]:
    """Every form of the settings area, sent with ``headers`` and this session's CSRF token;
    then a sign-in that would work (its form's token and cookie, the right password)."""
    for url, data in _posts(seeded):
        yield url, web.client.post(url, data={"csrf_token": web.token, **data}, headers=headers)
    web.get("/sign-in")
    form = {"email": ROOT, "password": PASSWORD, "csrf_token": web.token}
    yield "/sign-in", web.client.post("/sign-in", data=form, headers=headers)


def test_every_post_of_the_settings_area_is_listed_here(hooks: Settings, seeded: Seeded) -> None:
    """So that a new form cannot miss the tests below: every route that changes something."""
    app = create_app(hooks)
    posted = [url for url, _ in _posts(seeded)] + ["/sign-in"]
    for route in app.routes:
        if not isinstance(route, APIRoute) or not urls.is_ui_path(route.path):
            continue
        if (route.methods or set()) - security.SAFE_METHODS:
            assert any(route.path_regex.match(url) for url in posted), route.path


@pytest.mark.parametrize("headers", FROM_ELSEWHERE, ids=lambda h: " ".join(h.values()))
def test_posts_from_another_site_are_refused_with_a_valid_token(
    web: Browser, seeded: Seeded, sessions: sessionmaker[Session], headers: dict[str, str]
) -> None:
    before = _snapshot(sessions)
    for url, response in _every_post(web, seeded, headers):
        assert response.status_code == 403, url
        assert "Form refused" in response.text
        assert CROSS_SITE_WORDS in response.text
        assert response.headers["content-type"].startswith("text/html")
        assert "set-cookie" not in response.headers
    assert _snapshot(sessions) == before


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "same-origin", "Origin": OWN},  # what a browser sends
        {"Sec-Fetch-Site": "same-origin"},
        {"Origin": OWN},
        {"Origin": "HTTP://TESTSERVER:80"},
        {"Sec-Fetch-Site": "none"},  # typed or bookmarked by the user
        {},  # curl, older browsers: the CSRF token alone
    ],
    ids=lambda h: " ".join(h.values()) or "no headers",
)
def test_posts_from_the_settings_themselves_are_accepted(
    web: Browser, seeded: Seeded, sessions: sessionmaker[Session], headers: dict[str, str]
) -> None:
    before = _snapshot(sessions)
    *forms, (_, sign_in) = _every_post(web, seeded, headers)
    for url, response in forms:
        assert response.status_code in (200, 303), (url, response.text)
    assert (sign_in.status_code, sign_in.headers["location"]) == (303, "/")
    assert _snapshot(sessions) != before


def test_behind_a_proxy_the_public_url_is_the_settings_own_origin(
    hooks: Settings, seeded: Seeded
) -> None:
    """A proxy that sends its own Host (``127.0.0.1:8000``) and terminates TLS: the browser's
    origin is CLUBWIRE_PUBLIC_URL's."""
    public = hooks.model_copy(update={"public_url": "https://hooks.example.org"})
    with browser(public, base_url="http://127.0.0.1:8000") as web:
        web.sign_in(ROOT)
        form = {"name": "x", "scope": ["read:programs"], "csrf_token": web.token}
        ours = {"Sec-Fetch-Site": "same-origin", "Origin": "https://hooks.example.org"}
        assert web.client.post(f"{CLUB}/api-keys", data=form, headers=ours).status_code == 303
        theirs = {"Origin": "https://example.org"}
        assert web.client.post(f"{CLUB}/api-keys", data=form, headers=theirs).status_code == 403


def test_a_refusal_is_logged_as_one_line_without_secrets(
    web: Browser, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    cookie = web.client.cookies[security.SESSION_COOKIE]
    with capturing(monkeypatch) as logged:
        web.client.post(
            "/sign-out?next=secret",
            data={"csrf_token": web.token},
            headers={"Origin": "https://evil.example:" + "9" * 500},
        )
    (line,) = [line for line in logged.lines() if line.get("logger") == "clubwire.web.ui_base"]
    assert line["level"] == "warning"
    shown = ("https://evil.example:" + "9" * 500)[: security.SHOWN_HEADER - 1] + "…"
    assert line["message"] == f'refused a POST to /sign-out from another site (Origin: "{shown}")'

    for secret in (web.token, cookie, "next=secret"):
        assert secret not in str(line)


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "x" * 20_000},
        [("Origin", b"http://testserver\xff\xfe")],  # not UTF-8
        [("Sec-Fetch-Site", "same\u2010origin".encode())],  # a lookalike hyphen, in UTF-8
        {"Origin": "http://testserver/"},
        {"Origin": "http://user@testserver"},
        {"Origin": "http://[::1"},
        {"Origin": "http://testserver:99999"},
        {"Host": "[::1", "Origin": "http://[::1"},
        {"Host": "testserver:nope", "Origin": "http://testserver:nope"},
    ],
)
def test_hostile_headers_are_refused_not_failed(
    web: Browser, seeded: Seeded, sessions: sessionmaker[Session], headers: object
) -> None:
    before = _snapshot(sessions)
    response = web.client.post(
        f"{CLUB}/api-keys",
        data={"csrf_token": web.token, "name": "x", "scope": "read:programs"},
        headers=headers,  # type: ignore[arg-type]
    )
    assert response.status_code == 403, response.text
    assert CROSS_SITE_WORDS in response.text
    assert _snapshot(sessions) == before
