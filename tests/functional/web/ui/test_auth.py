"""Staff sign-in and sign-out: server-side sessions, throttling, safe redirects."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx2
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.settings import Settings
from clubwire.storage.models import WebSession
from tests.factories import PASSWORD, make_club, make_staff
from tests.functional import processes
from tests.functional.ui_pages import Browser, browser

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


# -- real requests to a real server, behind a trusted proxy -------------------------------------


def _signed_in(client: httpx2.Client, password: str, address: str) -> int:
    """The status of a sign-in as ADMIN from ``address`` (the proxy's X-Forwarded-For)."""
    forwarded = {"X-Forwarded-For": address}
    client.get("/sign-in", headers=forwarded)
    token = client.cookies["clubwire_sign_in"]
    form = {"email": ADMIN, "password": password, "csrf_token": token}
    return client.post("/sign-in", data=form, headers=forwarded).status_code


def test_guessing_from_anywhere_never_locks_the_owner_out(
    settings: Settings, staff: None, tmp_path: Path
) -> None:
    """A guesser refused at their address; the owner in from their desk, and from the
    browser they signed in with even once the guessing from many addresses slows the
    account; the guesser, from many addresses, slowed."""
    with ExitStack() as stack:
        (api,) = processes.servers(
            stack, settings, tmp_path, 1, CLUBWIRE_TRUSTED_PROXIES="127.0.0.1"
        )
        base = api.split("/clubs/")[0]
        guesser = stack.enter_context(httpx2.Client(base_url=base, follow_redirects=False))
        owner = stack.enter_context(httpx2.Client(base_url=base, follow_redirects=False))
        guesses = [_signed_in(guesser, "wrong password!", "203.0.113.7") for _ in range(6)]
        assert guesses == [422] * 5 + [429]
        assert _signed_in(owner, PASSWORD, "198.51.100.1") == 303
        assert "clubwire_device" in owner.cookies
        more = [_signed_in(guesser, "wrong password!", f"203.0.113.{n}") for n in range(20, 31)]
        assert more[-1] == 429  # the account now slowed...
        assert _signed_in(guesser, PASSWORD, "203.0.113.99") == 429  # ...for anyone unknown
        assert _signed_in(owner, PASSWORD, "198.51.100.1") == 303  # but its owner's browser
