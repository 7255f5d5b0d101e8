"""In order (issue 35) in the settings area, on both databases: the Add and Edit forms' box,
the endpoint's card, and a held delivery everywhere it shows (waiting for the sequence before
it, with no Retry); one sent after a delivery erased says which sequence it missed."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.personal_data import Wanted
from clubwire.services import clubs, endpoints
from clubwire.services.delivery import events
from clubwire.services.personal_data import erasures
from clubwire.settings import Settings
from clubwire.storage.models import Delivery, Endpoint, Event
from tests.factories import EPOCH, FakeClock, about, make_club, make_staff, receiver_settings
from tests.functional.ui_pages import Browser, browser, part

ADMIN = "admin@granite.example"
TAB = "/settings/granite/webhooks"
URL = "https://127.0.0.1:9/hooks"
BOX = "Deliver each resource&#39;s events in order"
KIND = "registration.created"


@pytest.fixture
def hooks(settings: Settings) -> Settings:
    return receiver_settings(settings)


@pytest.fixture
def web(hooks: Settings, sessions: sessionmaker[Session]) -> Iterator[Browser]:
    with sessions.begin() as session:
        make_club(session, "granite")
    make_staff(sessions, ADMIN, clubs=["granite"])
    with browser(hooks, FakeClock()) as web:
        web.sign_in(ADMIN)
        yield web


def _endpoint(sessions: sessionmaker[Session]) -> Endpoint:
    with sessions() as session:
        (endpoint,) = endpoints.list_endpoints(session, clubs.get_club(session, "granite").id)
        return endpoint


def _box(page: str, form: str) -> str:
    """The in-order box's input of the form whose fields' ids start with ``form``."""
    return part(page, f'<input type="checkbox" id="{form}-ordered"', ">")


def _order_shown(web: Browser, endpoint_id: str) -> str:
    return part(web.get(TAB).text, f'<dd id="endpoint-{endpoint_id}-order">', "</dd>")


def test_the_box_is_on_add_and_edit_with_its_hint_and_the_card_says_in_order(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    tab = web.get(TAB).text
    assert f'<label for="new-endpoint-ordered">{BOX}</label>' in tab
    assert _box(tab, "new-endpoint") == (
        ' name="ordered" value="yes" aria-describedby="new-endpoint-ordered-hint"'
    )
    hint = part(tab, '<p class="hint" id="new-endpoint-ordered-hint">', "</p>")
    assert hint.startswith("A game&#39;s, member&#39;s or invoice&#39;s events reach you one")
    fields = {"url": URL, "event": [KIND], "ordered": "yes"}
    assert web.post(TAB, fields).status_code == 303
    endpoint = _endpoint(sessions)
    assert endpoint.ordered is True
    assert _order_shown(web, endpoint.id).startswith("In order")
    edit = f"{TAB}/{endpoint.id}/edit"
    assert " checked aria-describedby" in _box(web.get(edit).text, "endpoint")
    assert web.post(edit, {"url": URL, "event": [KIND]}).status_code == 303
    assert _endpoint(sessions).ordered is False
    assert _order_shown(web, endpoint.id) == "Any order"
    assert " checked" not in _box(web.get(edit).text, "endpoint")
    assert web.post(edit, fields).status_code == 303
    assert _endpoint(sessions).ordered is True


def test_the_box_ticked_on_a_form_with_errors_stays_ticked(
    web: Browser, sessions: sessionmaker[Session]
) -> None:
    refused = web.post(TAB, {"url": URL, "event": ["ping"], "ordered": "yes"})
    assert refused.status_code == 422
    assert " checked aria-describedby" in _box(refused.text, "new-endpoint")
    assert not _endpoint_ids(sessions)


def _endpoint_ids(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        return list(session.scalars(select(Endpoint.id)))


def _publish(sessions: sessionmaker[Session], hooks: Settings, *members: str) -> list[str]:
    """An ordered endpoint, then a registration of each member of the same invoice, in turn:
    their deliveries, first to last."""
    with sessions.begin() as session:
        granite = clubs.get_club(session, "granite")
        endpoints.create_endpoint(session, granite, URL, [KIND], EPOCH, hooks, ordered=True)
        published = [
            events.publish(session, granite, KIND, about(KIND, email=email), EPOCH)[0].id
            for email in members
        ]
        by_event = {d.event_id: d.id for d in session.scalars(select(Delivery))}
    return [by_event[event_id] for event_id in published]


def _key(sessions: sessionmaker[Session], delivery_id: str) -> str:
    with sessions() as session:
        key = session.scalar(
            select(Event.ordering_key).join(Delivery).where(Delivery.id == delivery_id)
        )
    assert key is not None
    return key


def test_a_held_delivery_waits_for_the_sequence_before_it_and_offers_no_retry(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings
) -> None:
    first, held = _publish(sessions, hooks, "ada@example.org", "ada@example.org")
    key = _key(sessions, held)
    page = web.get(f"/settings/granite/deliveries/{held}").text
    assert '<dd class="status pending waiting">waiting</dd>' in page
    assert part(page, '<dd id="ordering-key">', "</dd>") == (
        f"<code>{key}</code>, sequence 2, delivered in order"
    )
    assert part(page, '<dd id="next-attempt">', "</dd>") == (
        f"Waiting for sequence 1 of <code>{key}</code> to be delivered"
    )
    assert f"/deliveries/{held}/retry" not in page
    assert "it waits for the delivery of sequence 1, which goes first" in page
    assert 'id="missed-sequence"' not in page
    ahead = web.get(f"/settings/granite/deliveries/{first}").text
    assert f"/deliveries/{first}/retry" in ahead
    assert f"<code>{key}</code>, sequence 1, delivered in order" in ahead
    refused = web.post(f"/settings/granite/deliveries/{held}/retry", {})
    assert refused.status_code == 409
    assert "which goes first" in refused.text


def test_the_tables_show_a_held_delivery_waiting_without_retry(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings
) -> None:
    first, held = _publish(sessions, hooks, "ada@example.org", "ada@example.org")
    key = _key(sessions, held)
    endpoint_id = _endpoint(sessions).id
    for page in (TAB, f"{TAB}/{endpoint_id}/deliveries"):
        shown = web.get(page).text
        row = part(shown, f'id="delivery-{held}"')
        status = part(row, '<td class="status pending waiting">', "</td>")
        assert re.sub(r"<[^>]+>", "", status) == (f"waiting (for sequence 1 of {key})")
        assert '<td data-label="Next attempt">after sequence 1</td>' in row
        assert f'id="retry-{held}"' not in row
        assert f'id="retry-{first}"' in part(shown, f'id="delivery-{first}"')


def test_a_delivery_sent_after_one_erased_says_which_sequence_it_missed(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings
) -> None:
    erased, after = _publish(sessions, hooks, "ada@example.org", "bo@example.org")
    erasures.erase(sessions, "granite", Wanted(email="ada@example.org"), FakeClock(), "platform")
    page = web.get(f"/settings/granite/deliveries/{after}").text
    assert part(page, '<dd id="missed-sequence">', "</dd>") == (
        "Sent after sequence 1 of this resource died or was erased before it was delivered."
    )
    assert '<dd class="status pending">pending</dd>' in page
    assert f"/deliveries/{after}/retry" in page
    assert 'id="missed-sequence"' not in web.get(f"/settings/granite/deliveries/{erased}").text
