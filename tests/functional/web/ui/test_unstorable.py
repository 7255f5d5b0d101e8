"""Text the database cannot hold in the settings area: a form comes back with the message
beside the field (422, as for any invalid input) and nothing is written; a path or query
string holding NUL is refused (422) before anything is looked up. The same form or page
without the bad character works."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs, endpoints
from clubwire.services.club_api import keys
from clubwire.settings import Settings
from tests.factories import PASSWORD, make_club, make_endpoint, make_staff, receiver_settings
from tests.functional.ui_pages import Browser, browser
from tests.functional.unstorable import NUL, NUL_REFUSED, no_traceback, rows

ROOT = "root@clubwire.example"
KEYS = "/settings/granite/api-keys"
HOOKS = "/settings/granite/webhooks"
URL = "https://127.0.0.1:9/hooks"
FIELD_REFUSED = "Must not contain NUL characters (\\u0000)."
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def web(settings: Settings, sessions: sessionmaker[Session]) -> Iterator[Browser]:
    """A signed-in superadmin; granite has one endpoint."""
    hooks = receiver_settings(settings)
    with sessions.begin() as session:
        make_endpoint(session, make_club(session, "granite"), hooks)
    make_staff(sessions, ROOT, superadmin=True)
    with browser(hooks) as web:
        web.sign_in(ROOT)
        web.get(HOOKS)
        yield web


def _error(page: str, field_id: str) -> str:
    """The message shown beside a field."""
    marker = f'<p class="field-error" id="{field_id}-error">'
    assert marker in page, f"no error beside {field_id}"
    return page.split(marker, 1)[1].split("</p>", 1)[0]


def _raw_post(web: Browser, url: str, fields: str) -> str:
    """Post a form body as written (``fields``: url-encoded), with the CSRF token."""
    response = web.client.post(url, content=f"csrf_token={web.token}&{fields}", headers=FORM)
    return response.text


# -- sign-in ---------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["email", "password"])
def test_sign_in_refuses_a_nul_beside_the_field_and_counts_nothing(
    settings: Settings,
    sessions: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
    field: str,
) -> None:
    make_staff(sessions, ROOT, superadmin=True)
    typed = {"email": ROOT, "password": PASSWORD}
    typed[field] = typed[field][:4] + NUL + typed[field][4:]
    before = rows(sessions)
    with browser(settings) as web:
        web.get("/sign-in")
        refused = web.post("/sign-in", typed)
        assert refused.status_code == 422
        assert FIELD_REFUSED in _error(refused.text, field)
        assert "clubwire_session" not in refused.headers.get("set-cookie", "")
        assert rows(sessions) == before  # not even a failure counted toward the throttle
        no_traceback(caplog)
        assert web.sign_in(ROOT).status_code == 303


def test_sign_in_reads_an_undecodable_escape_as_a_replacement_character(
    settings: Settings, sessions: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    """A form's escapes are decoded as UTF-8 with U+FFFD for what is not (a lone surrogate's
    bytes, ``%FF``): text the database holds, so the sign-in simply fails as usual."""
    make_staff(sessions, ROOT, superadmin=True)
    with browser(settings) as web:
        web.get("/sign-in")
        page = _raw_post(web, "/sign-in", "email=ro%ED%A0%80ot%FF%40clubwire.example&password=x")
        assert "The email or the password is not right." in _error(page, "password")
    assert rows(sessions)["sign_in_failures"] == 3  # the account, the address, and the two
    no_traceback(caplog)


# -- the settings forms ----------------------------------------------------------------------


def test_a_key_name_with_a_nul_is_refused_beside_the_field(
    web: Browser, sessions: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    web.get(KEYS)
    before = rows(sessions)
    refused = web.post(KEYS, {"name": f"Web{NUL}site", "scope": ["read:programs"]})
    assert refused.status_code == 422
    assert FIELD_REFUSED in _error(refused.text, "key-name")
    assert rows(sessions) == before
    no_traceback(caplog)
    created = web.post(KEYS, {"name": "Website", "scope": ["read:programs"]})
    assert created.status_code == 303
    assert rows(sessions)["api_keys"] == 1


def test_a_key_name_with_an_undecodable_escape_is_kept_with_a_replacement_character(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.get(KEYS)
    _raw_post(web, KEYS, "name=Web%FFsite&scope=read%3Aprograms")
    with sessions() as session:
        (key,) = keys.list_keys(session, clubs.get_club(session, "granite").id)
    assert key.name == "Web\ufffdsite"


def test_an_endpoint_url_with_a_nul_is_refused_beside_the_field(
    web: Browser, sessions: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    before = rows(sessions)
    form = {"url": f"https://127.0.0.1:9/ho{NUL}oks", "event": ["game.updated"]}
    refused = web.post(HOOKS, form)
    assert refused.status_code == 422
    assert FIELD_REFUSED in _error(refused.text, "new-endpoint-url")
    assert 'value="game.updated" checked' in refused.text
    assert rows(sessions) == before
    no_traceback(caplog)
    assert web.post(HOOKS, {**form, "url": URL}).status_code == 303
    assert rows(sessions)["endpoints"] == 2


def test_an_endpoint_edit_with_a_nul_changes_nothing(
    web: Browser, sessions: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    endpoint_id = _endpoint_id(sessions)
    edit = f"{HOOKS}/{endpoint_id}/edit"
    web.get(edit)
    refused = web.post(edit, {"url": f"{URL}{NUL}", "event": ["game.updated"]})
    assert refused.status_code == 422
    assert FIELD_REFUSED in _error(refused.text, "endpoint-url")
    no_traceback(caplog)
    with sessions() as session:
        assert endpoints.get_endpoint(session, _club_id(session), endpoint_id).url == URL
    changed = web.post(edit, {"url": f"{URL}/new", "event": ["game.updated"]})
    assert changed.status_code == 303


def _club_id(session: Session) -> str:
    return clubs.get_club(session, "granite").id


def _endpoint_id(sessions: sessionmaker[Session]) -> str:
    with sessions() as session:
        (endpoint,) = endpoints.list_endpoints(session, _club_id(session))
        return endpoint.id


# -- paths and query strings -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/settings/gran%00ite"),
        ("GET", "/settings/gran%00ite/api-keys"),
        ("GET", "/settings/granite/api-keys/abc%00def/revoke"),
        ("POST", "/settings/granite/api-keys/abc%00def/revoke"),
        ("GET", "/settings/granite/webhooks/{endpoint}%00/edit"),
        ("POST", "/settings/granite/webhooks/{endpoint}%00/disable"),
        ("POST", "/settings/granite/webhooks/{endpoint}%00/test"),
        ("GET", "/settings/granite/deliveries/dlv_a%00b"),
        ("POST", "/settings/granite/deliveries/dlv_a%00b/retry"),
        ("POST", "/admin/clubs/gran%00ite/webhooks"),
    ],
)
def test_a_nul_in_a_settings_path_is_refused_before_any_lookup(
    web: Browser,
    sessions: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
) -> None:
    url = path.format(endpoint=_endpoint_id(sessions))
    before = rows(sessions)
    form = {"csrf_token": web.token, "enabled": "off"}
    answer = web.client.request(method, url, data=form if method == "POST" else None)
    assert answer.status_code == 422
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["detail"] == "The path must not contain NUL characters (\\u0000)."
    assert rows(sessions) == before
    no_traceback(caplog)
    fixed = web.client.request(method, url.replace("%00", ""), data=form)
    assert fixed.status_code < 500


@pytest.mark.parametrize("url", [f"{HOOKS}?tab=%00", "/sign-in?next=/settings%00"])
def test_a_nul_in_a_settings_query_string_is_refused(
    web: Browser, caplog: pytest.LogCaptureFixture, url: str
) -> None:
    answer = web.get(url)
    assert answer.status_code == 422
    assert answer.json()["detail"] == f"The query string {NUL_REFUSED}."
    no_traceback(caplog)
    assert web.get(url.replace("%00", "")).status_code == 200
