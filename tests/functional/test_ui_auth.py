"""Staff sign-in and sign-out: server-side sessions, throttling, safe redirects."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.settings import Settings
from clubwire.storage.models import WebSession
from tests.factories import make_club
from tests.functional.ui_pages import PASSWORD, Browser, browser, make_staff

ADMIN = "admin@granite.example"
ROOT = "root@clubwire.example"


@pytest.fixture
def staff(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        make_club(session, "granite")
        make_club(session, "rocks")
    make_staff(sessions, ADMIN, clubs=["granite"])
    make_staff(sessions, ROOT, superadmin=True)


@pytest.fixture
def web(settings: Settings, staff: None) -> Iterator[Browser]:
    with browser(settings) as web:
        yield web


def _sessions(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(WebSession)) or 0


def test_the_sign_in_form_is_labelled_and_carries_a_csrf_token(web: Browser) -> None:
    page = web.get("/sign-in")
    assert page.status_code == 200
    assert '<label for="email">Email</label>' in page.text
    assert '<label for="password">Password</label>' in page.text
    assert 'autocomplete="current-password"' in page.text
    assert web.token
    assert web.client.cookies["clubwire_sign_in"] == web.token


def test_signing_in_starts_a_session_with_a_safe_cookie(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    response = web.sign_in(ADMIN)
    assert response.status_code == 303
    assert response.headers["location"] == "/"
    cookie = response.headers["set-cookie"].lower()
    assert cookie.startswith("clubwire_session=")
    assert "httponly" in cookie
    assert "samesite=lax" in cookie
    assert "path=/" in cookie
    assert "secure" not in cookie
    assert _sessions(sessions) == 1


def test_cookies_are_secure_when_served_over_https(settings: Settings, staff: None) -> None:
    with browser(settings, base_url="https://testserver") as web:
        assert "secure" in web.sign_in(ADMIN).headers["set-cookie"].lower()
    behind_a_proxy = settings.model_copy(update={"public_url": "https://clubwire.example"})
    with browser(behind_a_proxy) as web:
        assert "secure" in web.get("/sign-in").headers["set-cookie"].lower()


@pytest.mark.parametrize(("email", "landing"), [(ADMIN, "/settings"), (ROOT, "/admin")])
def test_the_start_page_sends_each_user_to_their_landing_page(
    web: Browser, email: str, landing: str
) -> None:
    web.sign_in(email)
    assert web.get("/").headers["location"] == landing


def test_a_club_admin_of_one_club_lands_in_it(web: Browser) -> None:
    web.sign_in(ADMIN)
    assert web.get("/settings").headers["location"] == "/settings/granite/webhooks"


def test_every_sign_in_gets_a_new_session_and_ends_the_previous_one(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.sign_in(ADMIN)
    first = web.client.cookies["clubwire_session"]
    web.sign_in(ADMIN)
    second = web.client.cookies["clubwire_session"]
    assert first != second
    assert _sessions(sessions) == 1


def test_a_wrong_password_is_a_form_error_that_keeps_the_email(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    response = web.sign_in(ADMIN, "not the password at all")
    assert response.status_code == 422
    assert "The email or the password is not right." in response.text
    assert f'value="{ADMIN}"' in response.text
    assert "not the password at all" not in response.text
    assert 'aria-describedby="password-error"' in response.text
    assert "clubwire_session" not in web.client.cookies
    assert _sessions(sessions) == 0


def test_failed_sign_ins_are_throttled(web: Browser) -> None:
    for _ in range(5):
        assert web.sign_in(ADMIN, "wrong password, again").status_code == 422
    response = web.sign_in(ADMIN, PASSWORD)
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.text
    assert "clubwire_session" not in web.client.cookies


def test_signing_out_ends_the_session_on_the_server(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.sign_in(ADMIN)
    old_cookie = web.client.cookies["clubwire_session"]
    response = web.post("/sign-out")
    assert response.status_code == 303
    assert response.headers["location"] == "/sign-in"
    assert 'clubwire_session=""' in response.headers["set-cookie"]
    assert _sessions(sessions) == 0
    web.client.cookies.set("clubwire_session", old_cookie)
    assert web.get("/settings/granite/webhooks").status_code == 303


@pytest.mark.parametrize(
    "path", ["/", "/settings", "/settings/granite/webhooks", "/settings/granite/api-keys", "/admin"]
)
def test_visitors_are_sent_to_sign_in_and_back(web: Browser, path: str) -> None:
    response = web.get(path)
    assert response.status_code == 303
    assert response.headers["location"] == f"/sign-in?next={path}"


def test_after_sign_in_the_visitor_goes_where_they_were_going(web: Browser) -> None:
    target = "/settings/granite/api-keys"
    assert f'name="next" value="{target}"' in web.get(f"/sign-in?next={target}").text
    assert web.sign_in(ADMIN, next_path=target).headers["location"] == target


@pytest.mark.parametrize(
    "target", ["//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:x"]
)
def test_sign_in_never_redirects_to_another_site(web: Browser, target: str) -> None:
    assert 'name="next" value=""' in web.get(f"/sign-in?next={target}").text
    assert web.sign_in(ADMIN, next_path=target).headers["location"] == "/"


def test_a_sign_in_without_the_form_token_is_refused(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.get("/sign-in")
    response = web.post("/sign-in", {"email": ADMIN, "password": PASSWORD}, token="forged")
    assert response.status_code == 403
    assert "nothing was changed" in response.text
    assert _sessions(sessions) == 0
