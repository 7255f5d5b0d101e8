"""An endpoint's deliveries page over HTTP (issue 15, item 6), on both databases: the link
from Recent deliveries, rows and page links, hostile filters and cursors answered with the
form and its message (never a 500), Retry back to the same page, and another club's
endpoint not found."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Status
from clubwire.services import clubs
from clubwire.settings import Settings
from tests.factories import EPOCH, FakeClock, make_club, make_delivery, make_endpoint, make_staff
from tests.functional.ui_pages import Browser, browser, part

ADMIN = "admin@granite.example"
TAB = "/settings/granite/webhooks"


@pytest.fixture
def made(sessions: sessionmaker[Session], settings: Settings) -> tuple[str, str, list[str]]:
    """Granite's endpoint with 60 deliveries (newest first), and Rocks' endpoint."""
    with sessions.begin() as session:
        granite, rocks = make_club(session, "granite"), make_club(session, "rocks")
        endpoint, _ = make_endpoint(session, granite, settings, kinds=("registration.created",))
        rivals, _ = make_endpoint(session, rocks, settings, kinds=("registration.created",))
        made = [
            make_delivery(session, granite, endpoint, EPOCH + timedelta(minutes=n))
            for n in range(60)
        ]
        make_delivery(session, rocks, rivals, EPOCH, Status.SUCCEEDED)
    make_staff(sessions, ADMIN, clubs=["granite"])
    return endpoint.id, rivals.id, made[::-1]


@pytest.fixture
def web(settings: Settings, made: tuple[str, str, list[str]]) -> Iterator[Browser]:
    with browser(settings, FakeClock()) as web:
        web.sign_in(ADMIN)
        yield web


def test_the_tab_links_to_every_delivery_a_page_at_a_time(
    web: Browser, made: tuple[str, str, list[str]]
) -> None:
    endpoint_id, _, newest_first = made
    tab = web.get(TAB).text
    page = f"{TAB}/{endpoint_id}/deliveries"
    assert f'href="{page}" id="all-deliveries-{endpoint_id}">All deliveries…</a>' in tab

    first = web.get(page)
    older = re.search(r'<a href="([^"]+)" rel="next" id="deliveries-older"', first.text)
    assert older is not None
    assert older.group(1).startswith(f"{page}?older=")
    second = web.get(html.unescape(older.group(1)))

    assert first.status_code == 200
    assert second.status_code == 200
    row = part(first.text, f'id="delivery-{newest_first[0]}"')
    assert f'href="/settings/granite/deliveries/{newest_first[0]}"' in row
    assert "<code>registration.created</code>" in row
    assert ">dead<" in row
    assert f'id="retry-{newest_first[0]}"' in row
    assert all(f'id="delivery-{i}"' in first.text for i in newest_first[:50])
    assert not any(f'id="delivery-{i}"' in first.text for i in newest_first[50:])
    assert all(f'id="delivery-{i}"' in second.text for i in newest_first[50:])
    assert 'id="deliveries-newer"' in second.text
    assert 'id="deliveries-older"' not in second.text


def test_retry_goes_back_to_the_same_page(web: Browser, made: tuple[str, str, list[str]]) -> None:
    endpoint_id, _, newest_first = made
    here = f"{TAB}/{endpoint_id}/deliveries?status=dead"
    web.get(here)
    response = web.post(f"/settings/granite/deliveries/{newest_first[3]}/retry", {"next": here})
    assert response.status_code == 303
    assert response.headers["location"] == here


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("status=bogus", "&#34;bogus&#34; is not a status"),
        ("event=%3Cscript%3E", "&#34;&lt;script&gt;&#34; is not an event kind"),
        ("since=%FF%FE", "From must be a time to the minute"),
        ("status=%FF", "&#34;\ufffd&#34; is not a status"),
        ("until=2026-02-30T10:00", "To must be a time to the minute"),
        ("since=" + "9" * 8_000, "From must be a time to the minute"),
        ("older=" + "A" * 8_000, "This page link is not valid"),
        ("older=" + _b64(b"\xff\xfe.dlv_x"), "This page link is not valid"),
        ("newer=" + _b64(b"999999999999999999.dlv_x"), "This page link is not valid"),
        ("older=" + _b64(b"-1.dlv_x"), "This page link is not valid"),
        ("older=!!!", "This page link is not valid"),
    ],
)
def test_a_hostile_filter_or_cursor_is_the_form_with_its_message(
    web: Browser, made: tuple[str, str, list[str]], query: str, message: str
) -> None:
    endpoint_id, _, newest_first = made
    response = web.get(f"{TAB}/{endpoint_id}/deliveries?{query}")
    assert response.status_code == 422
    assert message in response.text
    assert 'id="deliveries-filter"' in response.text
    assert newest_first[0] not in response.text


@pytest.mark.parametrize("query", ["status=%00", "older=abc%00", "since=2026-01-05T12:00%00"])
def test_nul_anywhere_in_the_query_is_refused_before_the_page(
    web: Browser, made: tuple[str, str, list[str]], query: str
) -> None:
    response = web.get(f"{TAB}/{made[0]}/deliveries?{query}")
    assert response.status_code == 422
    assert "must not contain NUL characters" in response.text


def test_another_clubs_endpoint_is_not_found_and_shows_nothing(
    web: Browser, made: tuple[str, str, list[str]], sessions: sessionmaker[Session]
) -> None:
    _, rivals, _ = made
    response = web.get(f"{TAB}/{rivals}/deliveries")
    theirs = web.get(f"/settings/rocks/webhooks/{rivals}/deliveries")
    with sessions() as session:
        rocks = clubs.get_club(session, "rocks")
    assert response.status_code == 404
    assert theirs.status_code == 404
    assert "dlv_" not in response.text
    assert rocks.id not in response.text
