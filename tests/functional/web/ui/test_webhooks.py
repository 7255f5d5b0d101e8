"""The Webhooks tab: endpoints created (secret shown once), edited, switched, rotated, deleted."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import off_reasons
from clubwire.domain.sealing import Sealer
from clubwire.services import clubs, endpoints, secret_keys
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Delivery, Endpoint
from tests.factories import (
    EPOCH,
    make_club,
    make_endpoint,
    make_staff,
    receiver_settings,
    registration,
)
from tests.functional.ui_pages import Browser, browser, part

ADMIN = "admin@granite.example"
TAB = "/settings/granite/webhooks"
URL = "https://127.0.0.1:9/hooks"
HOSTILE_URL = "https://127.0.0.1:9/<script>alert(1)</script>?q=<script>alert(1)</script>"
SECRET = re.compile(r"whsec_[0-9A-Za-z]+")


@pytest.fixture
def hooks(settings: Settings) -> Settings:
    return receiver_settings(settings)


@pytest.fixture
def web(hooks: Settings, sessions: sessionmaker[Session]) -> Iterator[Browser]:
    with sessions.begin() as session:
        make_club(session, "granite")
        make_club(session, "rocks")
    make_staff(sessions, ADMIN, clubs=["granite"])
    with browser(hooks) as web:
        web.sign_in(ADMIN)
        web.get(TAB)
        yield web


def _endpoints(sessions: sessionmaker[Session], slug: str = "granite") -> list[Endpoint]:
    with sessions() as session:
        return list(endpoints.list_endpoints(session, clubs.get_club(session, slug).id))


def _theirs(sessions: sessionmaker[Session], hooks: Settings) -> Endpoint:
    with sessions.begin() as session:
        endpoint, _ = make_endpoint(session, clubs.get_club(session, "rocks"), hooks)
        return endpoint


def _create(web: Browser, url: str = URL, *kinds: str) -> str:
    chosen = list(kinds or ["registration.created"])
    return web.submit(TAB, {"url": url, "event": chosen}).text


def test_a_new_endpoint_shows_its_signing_secret_once(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    created = web.submit(TAB, {"url": URL, "event": ["registration.created", "game.updated"]})
    assert created.headers["cache-control"] == "no-store"
    (secret,) = SECRET.findall(created.text)
    assert created.text.count(secret) == 1
    assert "Copy it now." in created.text
    (endpoint,) = _endpoints(sessions)
    assert (endpoint.url, endpoint.events) == (URL, "registration.created game.updated")
    later = "".join(
        web.get(f"{TAB}/{endpoint.id}/{page}").text for page in ("edit", "rotate", "delete")
    )
    assert not SECRET.search(later + web.get(TAB).text)


def test_the_tab_shows_each_endpoints_health(web: Browser, sessions: sessionmaker[Session]) -> None:
    _create(web, URL, "registration.created", "payment.completed")
    with sessions.begin() as session:
        endpoint = session.scalars(select(Endpoint)).one()
        endpoint.last_delivery_at, endpoint.last_response_code = EPOCH, 502
        endpoint.dead_in_a_row = 3
    card = part(web.get(TAB).text, f'id="endpoint-{endpoint.id}"', "</article>")
    assert f'<code class="url">{URL}</code>' in card.replace("<wbr>", "")  # breaks for phones
    assert "registration.created, payment.completed" in card
    assert 'role="switch" aria-checked="true"' in card
    assert "2026-01-05 12:00:00 UTC</time>, response code 502" in card
    assert "<dd>3 of 5</dd>" in card


def test_an_endpoint_form_with_errors_keeps_the_input_and_says_why(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    response = web.post(TAB, {"url": "http://example.com/hooks"})
    assert response.status_code == 422
    assert 'id="new-endpoint-url-error"' in response.text
    assert "URL must use https://" in response.text
    assert 'value="http://example.com/hooks"' in response.text
    assert 'aria-describedby="new-endpoint-url-hint new-endpoint-url-error"' in response.text
    assert 'id="new-endpoint-events-error"' in response.text
    assert "Subscribe to at least one event" in response.text
    kept = web.post(TAB, {"url": "ftp://x", "event": ["game.updated"]})
    assert 'value="game.updated" checked' in kept.text
    assert _endpoints(sessions) == []


def test_hostile_urls_are_escaped(web: Browser) -> None:
    created = _create(web, HOSTILE_URL)
    for page in (created, web.get(TAB).text):
        assert "<script>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_an_endpoint_is_edited(web: Browser, sessions: sessionmaker[Session]) -> None:
    _create(web)
    (endpoint,) = _endpoints(sessions)
    form = web.get(f"{TAB}/{endpoint.id}/edit")
    assert f'value="{URL}"' in form.text
    assert 'value="registration.created" checked' in form.text
    changed = {"url": "https://127.0.0.1:9/other", "event": ["game.updated", "member.updated"]}
    response = web.post(f"{TAB}/{endpoint.id}/edit", changed)
    assert response.status_code == 303
    assert response.headers["location"] == f"{TAB}#endpoint-{endpoint.id}"
    (edited,) = _endpoints(sessions)
    assert (edited.url, edited.events) == (
        "https://127.0.0.1:9/other",
        "game.updated member.updated",
    )


def test_an_edit_with_errors_changes_nothing(web: Browser, sessions: sessionmaker[Session]) -> None:
    _create(web)
    (endpoint,) = _endpoints(sessions)
    bad = {"url": "https://127.0.0.1:9/fine", "event": ["ping"]}
    response = web.post(f"{TAB}/{endpoint.id}/edit", bad)
    assert response.status_code == 422
    assert "ping cannot be subscribed to" in response.text
    assert 'value="https://127.0.0.1:9/fine"' in response.text
    assert _endpoints(sessions)[0].url == URL


def _rate_shown(web: Browser, endpoint_id: str) -> str:
    """What the endpoint's card on the tab says of its max rate."""
    return part(web.get(TAB).text, f'<dd id="endpoint-{endpoint_id}-max-rate">', "</dd>")


def _edit(web: Browser, endpoint_id: str, max_rate: str) -> int:
    fields = {"url": URL, "event": ["registration.created"], "max_rate": max_rate}
    return web.post(f"{TAB}/{endpoint_id}/edit", fields).status_code


def test_a_max_rate_is_set_shown_edited_and_cleared(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    web.post(TAB, {"url": URL, "event": ["registration.created"], "max_rate": "20"})
    (endpoint,) = _endpoints(sessions)
    assert endpoint.max_rate == 20
    assert _rate_shown(web, endpoint.id) == "20 deliveries per second"
    form = web.get(f"{TAB}/{endpoint.id}/edit").text
    assert 'id="endpoint-max-rate" name="max_rate" type="text" value="20"' in form
    assert _edit(web, endpoint.id, "1") == 303
    assert _endpoints(sessions)[0].max_rate == 1
    assert _rate_shown(web, endpoint.id) == "1 delivery per second"
    assert _edit(web, endpoint.id, "") == 303
    assert _endpoints(sessions)[0].max_rate is None
    assert _rate_shown(web, endpoint.id) == "no limit"
    assert 'name="max_rate" type="text" value=""' in web.get(f"{TAB}/{endpoint.id}/edit").text


def _field_error(page: str, field_id: str) -> str:
    return html.unescape(part(page, f'<p class="field-error" id="{field_id}-error">', "</p>"))


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("1e9", '"1e9" is not a max rate: write a whole number of deliveries per second'),
        ("５", '"５" is not a max rate: write a whole number'),
        ("9" * 10_000, "is not a max rate: the highest is 1000 deliveries per second."),
        ("5\x00", "Must not contain NUL characters (\\u0000)."),
    ],
)
def test_a_bad_max_rate_comes_back_beside_its_field_and_nothing_changes(
    web: Browser, sessions: sessionmaker[Session], typed: str, message: str
) -> None:
    fields = {"url": URL, "event": ["registration.created"], "max_rate": typed}
    refused = web.post(TAB, fields)
    assert refused.status_code == 422
    assert message in _field_error(refused.text, "new-endpoint-max-rate")
    assert 'aria-describedby="new-endpoint-max-rate-hint new-endpoint-max-rate-error"' in (
        refused.text
    )
    assert _endpoints(sessions) == []
    _create(web)
    (endpoint,) = _endpoints(sessions)
    edited = web.post(f"{TAB}/{endpoint.id}/edit", {**fields, "url": "https://127.0.0.1:9/new"})
    assert edited.status_code == 422
    assert message in _field_error(edited.text, "endpoint-max-rate")
    assert (_endpoints(sessions)[0].url, _endpoints(sessions)[0].max_rate) == (URL, None)


def test_deleting_asks_first(web: Browser, sessions: sessionmaker[Session]) -> None:
    _create(web)
    (endpoint,) = _endpoints(sessions)
    confirm = web.get(f"{TAB}/{endpoint.id}/delete")
    assert "Delete the endpoint" in confirm.text
    assert '<button type="submit" class="danger">Delete endpoint</button>' in confirm.text
    assert _endpoints(sessions) != []
    response = web.post(f"{TAB}/{endpoint.id}/delete")
    assert (response.status_code, response.headers["location"]) == (303, TAB)
    assert _endpoints(sessions) == []


def test_rotating_warns_then_shows_the_new_secret_once(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    (old,) = SECRET.findall(_create(web))
    (endpoint,) = _endpoints(sessions)
    confirm = web.get(f"{TAB}/{endpoint.id}/rotate")
    assert "The old secret stops working at once." in confirm.text
    assert not SECRET.search(confirm.text)
    rotated = web.submit(f"{TAB}/{endpoint.id}/rotate")
    assert rotated.headers["cache-control"] == "no-store"
    (new,) = SECRET.findall(rotated.text)
    assert new != old
    assert "The old secret has stopped working." in rotated.text
    assert _endpoints(sessions)[0].secret_sealed != endpoint.secret_sealed


def test_the_enabled_switch(web: Browser, sessions: sessionmaker[Session]) -> None:
    _create(web)
    (endpoint,) = _endpoints(sessions)
    off = web.post(f"{TAB}/{endpoint.id}/disable")
    assert (off.status_code, off.headers["location"]) == (303, f"{TAB}#endpoint-{endpoint.id}")
    assert not _endpoints(sessions)[0].enabled
    card = part(web.get(TAB).text, f'id="endpoint-{endpoint.id}"', "</article>")
    assert 'role="switch" aria-checked="false"' in card
    assert "Switched off by a club admin, since <time" in card
    assert _endpoints(sessions)[0].disabled_reason == "staff"
    web.post(f"{TAB}/{endpoint.id}/enable")
    assert (_endpoints(sessions)[0].enabled, _endpoints(sessions)[0].disabled_reason) == (
        True,
        None,
    )


def test_a_superadmin_switching_an_endpoint_off_is_recorded_as_one(
    hooks: Settings, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        endpoint, _ = make_endpoint(session, make_club(session, "granite"), hooks)
    make_staff(sessions, "sue@platform.example", superadmin=True)
    with browser(hooks) as web:
        web.sign_in("sue@platform.example")
        web.get(TAB)
        assert web.post(f"{TAB}/{endpoint.id}/disable").status_code == 303
        card = part(web.get(TAB).text, f'id="endpoint-{endpoint.id}"', "</article>")
    assert "Switched off by a superadmin, since <time" in card
    assert _endpoints(sessions)[0].disabled_reason == "superadmin"


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        ("gone", "Switched off: the receiver answered 410 Gone"),
        ("dead_in_a_row", "Switched off after 5 dead deliveries in a row"),
        ("Switched off by a user", "Switched off"),
        ("<script>alert(1)</script>", "Switched off"),
    ],
)
def test_a_switched_off_endpoint_words_its_reason(
    web: Browser, sessions: sessionmaker[Session], reason: str, words: str
) -> None:
    _create(web)
    (endpoint,) = _endpoints(sessions)
    with sessions.begin() as session:
        switched = session.get_one(Endpoint, endpoint.id)
        switched.enabled, switched.disabled_reason, switched.disabled_at = False, reason, EPOCH
    off = part(web.get(TAB).text, f'id="endpoint-{endpoint.id}-off">', "</p>")
    assert off.startswith(f'{words}, since <time datetime="2026-01-05T12:00:00.000Z">')


def _switched_off_with_skipped(sessions: sessionmaker[Session], endpoint_id: str) -> None:
    """What the worker leaves after five dead deliveries, then two events while it is off."""
    with sessions.begin() as session:
        club = clubs.get_club(session, "granite")
        endpoints.disable_endpoint(
            session, club.id, endpoint_id, EPOCH, off_reasons.OffReason.DEAD_IN_A_ROW
        )
        session.get_one(Endpoint, endpoint_id).dead_in_a_row = 5
        for _ in range(2):
            events.publish(session, club, "registration.created", registration(), EPOCH)


def _statuses(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        return list(session.scalars(select(Delivery.status)))


def test_a_switched_off_endpoint_says_why_and_offers_to_resend(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    _create(web)
    (endpoint,) = _endpoints(sessions)
    _switched_off_with_skipped(sessions, endpoint.id)
    card = part(web.get(TAB).text, f'id="endpoint-{endpoint.id}"', "</article>")
    assert "Switched off after 5 dead deliveries in a row, since" in card
    assert '<time datetime="2026-01-05T12:00:00.000Z">' in card
    assert "<dd>5 of 5</dd>" in card
    assert "Also send the 2 deliveries skipped while it was off" in card
    assert 'name="resend_skipped" value="yes"' in card
    web.post(f"{TAB}/{endpoint.id}/enable", {"resend_skipped": "yes"})
    (enabled,) = _endpoints(sessions)
    assert (enabled.enabled, enabled.dead_in_a_row, enabled.disabled_reason) == (True, 0, None)
    assert _statuses(sessions) == ["pending", "pending"]


def test_re_enabling_without_the_offer_leaves_skipped_deliveries_alone(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    _create(web)
    (endpoint,) = _endpoints(sessions)
    _switched_off_with_skipped(sessions, endpoint.id)
    web.post(f"{TAB}/{endpoint.id}/enable")
    assert _endpoints(sessions)[0].enabled
    assert _statuses(sessions) == ["skipped", "skipped"]


@pytest.mark.parametrize(
    ("method", "action"),
    [
        ("get", "edit"),
        ("post", "edit"),
        ("get", "delete"),
        ("post", "delete"),
        ("get", "rotate"),
        ("post", "rotate"),
        ("post", "disable"),
        ("post", "enable"),
        ("post", "test"),
    ],
)
def test_another_clubs_endpoint_is_not_found_and_unchanged(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings, method: str, action: str
) -> None:
    theirs = _theirs(sessions, hooks)
    url = f"{TAB}/{theirs.id}/{action}"
    form = {"url": "https://127.0.0.1:9/mine", "event": ["game.updated"]}
    response = web.get(url) if method == "get" else web.post(url, form)
    assert response.status_code == 404
    assert web.get(f"/settings/rocks/webhooks/{theirs.id}/{action}").status_code in (404, 405)
    (unchanged,) = _endpoints(sessions, "rocks")
    assert (unchanged.url, unchanged.events, unchanged.enabled) == (
        theirs.url,
        theirs.events,
        theirs.enabled,
    )
    assert unchanged.secret_sealed == theirs.secret_sealed
    assert _statuses(sessions) == []


def test_a_server_left_on_a_rotated_key_answers_503_and_tells_the_operators(
    web: Browser, hooks: Settings, sessions: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    """The secret key was rotated (``clubwire secrets rekey``) under a running server that
    still has the old one: it cannot seal a new secret, and says so as a 503, not a fault."""
    new_key = "a-new-secret-key-0123456789abcdefghijklmnop"
    with sessions.begin() as session:
        secret_keys.rekey(session, Sealer(hooks.secret_key_value()), Sealer(new_key))

    answer = web.post(TAB, {"url": URL, "event": ["registration.created"]})

    assert answer.status_code == 503
    assert _endpoints(sessions) == []
    refused = [r for r in caplog.records if r.name == "clubwire.web.problems"]
    assert [(r.levelname, r.exc_info) for r in refused] == [("ERROR", None)]
    assert "CLUBWIRE_SECRET_KEY" in refused[0].getMessage()


HEADER_VALUE = "k3y-5e1f-never-shown"


def _headers_shown(web: Browser, endpoint_id: str) -> str:
    """What the endpoint's card on the tab says of its headers."""
    return part(web.get(TAB).text, f'<dd id="endpoint-{endpoint_id}-headers">', "</dd>")


def _with_header(name: str, value: str, url: str = URL) -> dict[str, object]:
    return {
        "url": url,
        "event": ["registration.created"],
        "header_name": name,
        "header_value": value,
    }


def test_a_header_is_added_shown_masked_replaced_and_removed(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    created = web.submit(TAB, _with_header("X-Api-Key", HEADER_VALUE))
    (endpoint,) = _endpoints(sessions)
    assert _headers_shown(web, endpoint.id) == "<code>X-Api-Key: ••••••••</code>"
    edit = f"{TAB}/{endpoint.id}/edit"
    form = web.get(edit).text
    assert '<label for="endpoint-headers-remove-1">Remove <code>X-Api-Key: ••••••••</code>' in form
    assert 'name="header_value" type="text" value=""' in form
    assert web.post(edit, _with_header("Authorization", "Bearer t")).status_code == 303
    assert _headers_shown(web, endpoint.id) == (
        "<code>X-Api-Key: ••••••••</code>, <code>Authorization: ••••••••</code>"
    )
    replaced = {**_with_header("x-api-key", "other"), "remove_header": ["Authorization"]}
    assert web.post(edit, replaced).status_code == 303
    assert _headers_shown(web, endpoint.id) == "<code>x-api-key: ••••••••</code>"
    pages = created.text + form + web.get(TAB).text + web.get(edit).text
    assert HEADER_VALUE not in pages
    assert "other" not in _headers_shown(web, endpoint.id)
    assert (
        web.post(edit, {**_with_header("", ""), "remove_header": ["x-api-key"]}).status_code == 303
    )
    assert _headers_shown(web, endpoint.id) == "none"
    with sessions() as session:
        assert session.scalars(select(Endpoint.headers_sealed)).one() is None


@pytest.mark.parametrize(
    ("name", "value", "field", "message"),
    [
        ("Host", HEADER_VALUE, "name", "Host cannot be one of an endpoint's headers: HTTP sends"),
        ("CONTENT-TYPE", HEADER_VALUE, "name", "CONTENT-TYPE cannot be one of"),
        ("x-service-signature", HEADER_VALUE, "name", "x-service-signature cannot be one of"),
        ("Webhook-Id", HEADER_VALUE, "name", "Webhook-Id cannot be one of"),
        ("Upgrade", HEADER_VALUE, "name", "Upgrade cannot be one of an endpoint's headers: it is"),
        ("X-Api\r\nHost", HEADER_VALUE, "name", "A header's name holds the character U+000D"),
        ("X\u2010Api", HEADER_VALUE, "name", "A header's name holds the character U+2010"),
        ("", HEADER_VALUE, "name", "A header's name is empty"),
        ("X-Api-Key", f"{HEADER_VALUE}\r\nX-Evil: 1", "value", "X-Api-Key holds a line break"),
        ("X-Api-Key", f"{HEADER_VALUE}\x00", "value", "Must not contain NUL characters (\\u0000)."),
        ("X-Api-Key", f"{HEADER_VALUE}ü", "value", "holds a character that is not ASCII"),
        ("X-Api-Key", HEADER_VALUE * 500, "value", "The value of X-Api-Key has 10000 characters"),
        ("X-Api-Key", "", "value", "The value of X-Api-Key is empty"),
    ],
)  # fmt: skip
def test_a_bad_header_comes_back_beside_its_field_never_shown_and_nothing_changes(
    web: Browser, sessions: sessionmaker[Session], name: str, value: str, field: str, message: str
) -> None:
    refused = web.post(TAB, _with_header(name, value))
    assert refused.status_code == 422
    assert message in _field_error(refused.text, f"new-endpoint-headers-{field}")
    assert HEADER_VALUE not in refused.text
    assert _endpoints(sessions) == []
    web.submit(TAB, _with_header("X-Kept", "kept"))
    (endpoint,) = _endpoints(sessions)
    edited = web.post(f"{TAB}/{endpoint.id}/edit", _with_header(name, value))
    assert edited.status_code == 422
    assert message in _field_error(edited.text, f"endpoint-headers-{field}")
    assert HEADER_VALUE not in edited.text
    assert _endpoints(sessions)[0].headers_sealed == endpoint.headers_sealed


def test_a_value_typed_is_not_shown_back_with_another_fields_error(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    refused = web.post(TAB, _with_header("X-Api-Key", HEADER_VALUE, url="http://127.0.0.1/x"))
    assert refused.status_code == 422
    assert HEADER_VALUE not in refused.text
    assert 'name="header_name" type="text" value="X-Api-Key"' in refused.text
    retype = "Type the value again: a header's value is never shown back."
    assert retype in _field_error(refused.text, "new-endpoint-headers-value")
    assert _endpoints(sessions) == []


def test_an_eleventh_header_or_a_removed_one_gone_is_refused_above_the_headers(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings
) -> None:
    web.submit(TAB, _with_header("X-Own-0", "v"))
    (endpoint,) = _endpoints(sessions)
    edit = f"{TAB}/{endpoint.id}/edit"
    for i in range(1, 10):
        assert web.post(edit, _with_header(f"X-Own-{i}", "v")).status_code == 303
    sealed = _endpoints(sessions)[0].headers_sealed
    eleventh = web.post(edit, _with_header("X-Own-10", HEADER_VALUE))
    assert eleventh.status_code == 422
    assert "at most 10 headers of its own, and this would make 11" in _field_error(
        eleventh.text, "endpoint-headers"
    )
    gone = web.post(edit, {**_with_header("", ""), "remove_header": ["X-Gone"]})
    assert "X-Gone is not one of this endpoint's headers." in _field_error(
        gone.text, "endpoint-headers"
    )
    assert HEADER_VALUE not in eleventh.text
    assert _endpoints(sessions)[0].headers_sealed == sealed
    with sessions() as session:
        names = endpoints.header_names(session.get_one(Endpoint, endpoint.id), hooks)
    assert names == [f"X-Own-{i}" for i in range(10)]
