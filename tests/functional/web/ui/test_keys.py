"""The API keys tab: create (shown once, with an expiry), list (last use in full, expired
keys), revoke; the module switch; other clubs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs
from clubwire.services.club_api import keys
from clubwire.settings import Settings
from clubwire.storage.models import ApiKey
from tests.factories import EPOCH, make_club, make_key, make_staff
from tests.functional.ui_pages import Browser, browser, part

ADMIN = "admin@granite.example"
TAB = "/settings/granite/api-keys"
HOSTILE = "<script>alert(1)</script>"
MODULE_OFF = "Webhooks &amp; API are not enabled for this club"


@pytest.fixture
def web(settings: Settings, sessions: sessionmaker[Session]) -> Iterator[Browser]:
    with sessions.begin() as session:
        make_club(session, "granite")
        make_club(session, "rocks")
        make_club(session, "quiet", enabled=False)
    make_staff(sessions, ADMIN, clubs=["granite", "quiet"])
    with browser(settings) as web:
        web.sign_in(ADMIN)
        yield web


def _keys(sessions: sessionmaker[Session], club_slug: str = "granite") -> list[ApiKey]:
    with sessions() as session:
        return list(keys.list_keys(session, clubs.get_club(session, club_slug).id))


def _create(web: Browser, name: str = "Website", *chosen: str) -> str:
    web.get(TAB)
    return web.submit(TAB, {"name": name, "scope": list(chosen or ["read:programs"])}).text


def test_the_tab_has_a_heading_tabs_and_a_labelled_form(web: Browser) -> None:
    page = web.get(TAB)
    assert page.status_code == 200
    assert "<h1>Webhooks &amp; API</h1>" in page.text
    assert re.search(
        r'<a id="tab-api-keys" href="[^"]+" aria-current="page">API keys</a>', page.text
    )
    assert '<a id="tab-webhooks" href="/settings/granite/webhooks">Webhooks</a>' in page.text
    assert "<legend>Scopes</legend>" in page.text
    assert '<label for="key-name">Name</label>' in page.text
    for scope in ("read:programs", "read:members", "read:invoices", "read:games"):
        assert f'value="{scope}"' in page.text


def test_a_new_key_is_shown_once_and_never_again(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.get(TAB)
    posted = web.post(TAB, {"name": "Website", "scope": ["read:programs", "read:games"]})
    assert (posted.status_code, posted.headers["location"]) == (303, TAB)
    created = web.get(TAB)
    assert created.headers["cache-control"] == "no-store"
    (key,) = _keys(sessions)
    full = re.search(rf"cw_live_{key.prefix}_[0-9A-Za-z]+", created.text)
    assert full is not None
    assert created.text.count(full.group(0)) == 1
    assert "Copy it now." in created.text
    assert 'data-copy="new-key"' in created.text
    later = web.get(TAB).text + web.get(f"{TAB}/{key.prefix}/revoke").text
    assert full.group(0) not in later
    assert full.group(0).rsplit("_", 1)[1] not in later


def test_the_list_shows_prefix_name_scopes_last_used_and_status(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        club = clubs.get_club(session, "granite")
        used, _ = make_key(session, club, ("read:programs", "read:games"), "Used")
        make_key(session, club, name="Idle")
        keys.note_use(session, used.id, EPOCH)
    page = web.get(TAB).text
    row = part(page, f'id="key-{used.prefix}"')
    assert f"<code>{used.prefix}</code>" in row
    assert "Used" in row
    assert "read:programs, read:games" in row
    assert '<time datetime="2026-01-05T12:00:00.000Z">2026-01-05 12:00:00 UTC</time>' in row
    assert "active" in row
    idle = part(page, "Idle")
    assert "never" in idle


def test_a_key_form_with_errors_keeps_the_input_and_says_why_beside_the_field(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.get(TAB)
    response = web.post(TAB, {"name": "Website"})
    assert response.status_code == 422
    assert 'id="key-scopes-error"' in response.text
    assert "Choose at least one scope" in response.text
    assert 'aria-describedby="key-scopes-hint key-scopes-error"' in response.text
    assert 'value="Website"' in response.text
    too_long = web.post(TAB, {"name": "x" * 101, "scope": ["read:games"]})
    assert too_long.status_code == 422
    assert 'aria-describedby="key-name-hint key-name-error" aria-invalid="true"' in too_long.text
    assert "at most 100 characters" in too_long.text
    assert 'value="read:games" checked' in too_long.text
    assert 'value="read:programs" checked' not in too_long.text
    assert _keys(sessions) == []


def test_revoking_asks_first_then_revokes(web: Browser, sessions: sessionmaker[Session]) -> None:
    _create(web)
    (key,) = _keys(sessions)
    confirm = web.get(f"{TAB}/{key.prefix}/revoke")
    assert confirm.status_code == 200
    assert "stop working at once" in confirm.text
    assert '<button type="submit" class="danger">Revoke key</button>' in confirm.text
    response = web.post(f"{TAB}/{key.prefix}/revoke")
    assert response.status_code == 303
    assert response.headers["location"] == f"{TAB}#key-{key.prefix}"
    (revoked,) = _keys(sessions)
    assert revoked.revoked_at is not None
    row = part(web.get(TAB).text, f'id="key-{key.prefix}"')
    assert "revoked" in row
    assert "Revoke<" not in row


def test_a_revoked_key_no_longer_reads_the_api(web: Browser) -> None:
    full = re.findall(r"cw_live_\w+", _create(web))[0]
    api = "/clubs/granite/api/v1/programs"
    assert web.client.get(api, headers={"Authorization": f"Bearer {full}"}).status_code == 200
    web.post(f"{TAB}/{full.split('_')[2]}/revoke")
    assert web.client.get(api, headers={"Authorization": f"Bearer {full}"}).status_code == 401


def test_hostile_key_names_are_escaped(web: Browser) -> None:
    created = _create(web, HOSTILE)
    listed = web.get(TAB).text
    for page in (created, listed):
        assert HOSTILE not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_module_off_shows_only_the_message(web: Browser) -> None:
    for tab in ("webhooks", "api-keys"):
        page = web.get(f"/settings/quiet/{tab}")
        assert page.status_code == 200
        assert MODULE_OFF in page.text
        assert "<form" not in part(page.text, "<main", "</main>")
        assert 'id="tab-' not in page.text


def test_nothing_can_be_created_while_the_module_is_off(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.get(TAB)
    response = web.post("/settings/quiet/api-keys", {"name": "x", "scope": ["read:programs"]})
    assert response.status_code == 403
    assert MODULE_OFF in response.text
    assert _keys(sessions, "quiet") == []


def test_another_clubs_slug_and_key_are_not_found(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        theirs, _ = make_key(session, clubs.get_club(session, "rocks"))
    web.get(TAB)
    assert web.get("/settings/rocks/api-keys").status_code == 404
    assert web.post("/settings/rocks/api-keys", {"scope": ["read:games"]}).status_code == 404
    assert web.get(f"{TAB}/{theirs.prefix}/revoke").status_code == 404
    assert web.post(f"{TAB}/{theirs.prefix}/revoke").status_code == 404
    assert web.post(f"/settings/rocks/api-keys/{theirs.prefix}/revoke").status_code == 404
    (still,) = _keys(sessions, "rocks")
    assert still.revoked_at is None
    assert web.get("/settings/rocks").status_code == 404


def test_the_list_shows_where_and_by_what_a_key_was_last_used(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        used, _ = make_key(session, clubs.get_club(session, "granite"), name="Used")
        keys.note_use(session, used.id, EPOCH, "2001:db8::7", f"club-site/1.0 {HOSTILE}")
    row = part(web.get(TAB).text, f'id="key-{used.prefix}"')
    assert '<time datetime="2026-01-05T12:00:00.000Z">' in row
    assert "from <code>2001:db8::7</code>" in row
    assert "club-site/1.0 &lt;script&gt;alert(1)&lt;/script&gt;" in row
    assert HOSTILE not in row


def test_the_form_offers_never_30_90_and_365_days_never_chosen(web: Browser) -> None:
    form = part(web.get(TAB).text, 'id="create-key-heading"', "</form>")
    assert '<label for="key-expires">Expires</label>' in form
    assert 'aria-describedby="key-expires-hint"' in form
    options = re.findall(r'<option value="([^"]+)"( selected)?>([^<]+)</option>', form)
    assert options == [
        ("never", " selected", "Never"),
        ("30d", "", "In 30 days"),
        ("90d", "", "In 90 days"),
        ("365d", "", "In 365 days"),
    ]


def test_a_key_made_to_expire_shows_when_then_shows_as_expired(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.get(TAB)
    created = web.submit(TAB, {"name": "Season", "scope": ["read:programs"], "expires_in": "90d"})
    (key,) = _keys(sessions)
    assert key.expires_at == EPOCH + timedelta(days=90)
    row = part(created.text, f'id="key-{key.prefix}"')
    assert '<time datetime="2026-04-05T12:00:00.000Z">' in row
    assert '<td data-label="Status" class="state on">active</td>' in row
    with sessions.begin() as session:
        club = clubs.get_club(session, "granite")
        old, _ = keys.create_key(
            session, club, ["read:programs"], "Old", EPOCH - timedelta(days=31), "30d"
        )
    row = part(web.get(TAB).text, f'id="key-{old.prefix}"')
    assert '<td data-label="Status" class="state off">expired</td>' in row
    assert 'Expired <time datetime="2026-01-04T12:00:00.000Z">' in row
    assert "Revoke<" not in row


@pytest.mark.parametrize("choice", ["7d", "forever", "30d\x00"])
def test_an_unknown_expiry_comes_back_with_the_message_beside_the_field(
    web: Browser, sessions: sessionmaker[Session], choice: str
) -> None:
    web.get(TAB)
    response = web.post(TAB, {"name": "Website", "scope": ["read:programs"], "expires_in": choice})
    assert response.status_code == 422
    assert 'id="key-expires-error"' in response.text
    assert (
        'aria-describedby="key-expires-hint key-expires-error" aria-invalid="true"' in response.text
    )
    assert 'value="Website"' in response.text
    assert _keys(sessions) == []


def test_a_use_of_the_api_shows_its_address_and_user_agent_on_the_page(web: Browser) -> None:
    """Through the app: the API passes the request's client to ``ApiAccess.authorize``.
    (TestClient's peer address is ``testclient``.)"""
    full = re.findall(r"cw_live_\w+", _create(web))[0]
    headers = {"Authorization": f"Bearer {full}", "User-Agent": "granite-site/2.1\x7f"}
    assert web.client.get("/clubs/granite/api/v1/programs", headers=headers).status_code == 200
    row = part(web.get(TAB).text, f'id="key-{full.split("_")[2]}"')
    assert '<time datetime="2026-01-05T12:00:00.000Z">' in row
    assert "from <code>testclient</code>" in row
    assert "granite-site/2.1<" in row
