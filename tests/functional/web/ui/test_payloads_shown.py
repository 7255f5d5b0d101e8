"""What club staff see of a delivery whose payload expired or was erased, or which was
skipped (issue 34, item 2), on both databases: the words instead of the body, the reason a
delivery was skipped, and no Retry for a payload that cannot be sent again."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import orjson
import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import personal_data
from clubwire.domain.delivering import SkipReason, Status
from clubwire.services.personal_data import expiry
from clubwire.settings import Settings
from clubwire.storage.models import Delivery, Event
from tests.factories import EPOCH, FakeClock, make_club, make_delivery, make_endpoint, make_staff
from tests.functional.ui_pages import Browser, browser, part

ADMIN = "admin@granite.example"
DELIVERY = "/settings/granite/deliveries/{}"
OLD = EPOCH - timedelta(days=10)


@dataclass(frozen=True)
class Made:
    endpoint: str
    whole: str
    expired: str
    erased: str
    skipped: str


def _erase(session: Session, delivery_id: str) -> None:
    """The member of the delivery's event erased, as an erasure leaves it."""
    event = session.scalars(
        select(Event)
        .join(Delivery, Delivery.event_id == Event.id)
        .where(Delivery.id == delivery_id)
    ).one()
    member = personal_data.Wanted(email=str(_member(event)["email"]))
    erased = personal_data.erase(event.club_id, event.kind, event.body, member)
    assert erased is not None
    event.body, event.payload_removed = erased.body, personal_data.Removed.ERASED


def _member(event: Event) -> dict[str, object]:
    (member,) = personal_data.persons(event.kind, orjson.loads(event.body)["data"])
    return member


@pytest.fixture
def made(sessions: sessionmaker[Session], settings: Settings) -> Made:
    with sessions.begin() as session:
        granite = make_club(session, "granite")
        granite.payload_days = 7
        endpoint, _ = make_endpoint(session, granite, settings, kinds=("registration.created",))
        whole = make_delivery(session, granite, endpoint, EPOCH)
        expired = make_delivery(session, granite, endpoint, OLD)
        erased = make_delivery(session, granite, endpoint, EPOCH + timedelta(minutes=1))
        _erase(session, erased)
        skipped = make_delivery(session, granite, endpoint, EPOCH, Status.SKIPPED)
        session.execute(
            update(Delivery).where(Delivery.id == skipped).values(skipped_reason=SkipReason.OFF)
        )
    assert expiry.expire(sessions, EPOCH, timedelta(days=30)) == 1
    make_staff(sessions, ADMIN, clubs=["granite"])
    return Made(endpoint.id, whole, expired, erased, skipped)


@pytest.fixture
def web(settings: Settings, made: Made) -> Iterator[Browser]:
    with browser(settings, FakeClock()) as web:
        web.sign_in(ADMIN)
        yield web


def test_an_expired_payload_reads_payload_expired_and_offers_no_retry(
    web: Browser, made: Made
) -> None:
    page = web.get(DELIVERY.format(made.expired)).text
    assert '<p id="payload" class="notice">payload expired: it was emptied' in page
    assert "(payload expired): it cannot be sent again." in page
    assert f"/deliveries/{made.expired}/retry" not in page
    refused = web.post(f"/settings/granite/deliveries/{made.expired}/retry", {"next": ""})
    assert refused.status_code == 409
    assert "(payload expired): it cannot be sent again." in refused.text


def test_a_whole_payload_is_shown_and_an_erased_one_with_its_note(web: Browser, made: Made) -> None:
    whole = web.get(DELIVERY.format(made.whole)).text
    assert "&#34;event&#34;:&#34;registration.created&#34;" in part(whole, 'id="payload"')
    assert 'id="payload-note"' not in whole
    assert f"/deliveries/{made.whole}/retry" in whole
    erased = web.get(DELIVERY.format(made.erased)).text
    note = "Personal data in it was erased at a member&#39;s request: <code>[erased]</code>"
    assert note in erased
    assert "&#34;email&#34;:&#34;[erased]&#34;" in part(erased, 'id="payload"')
    assert f"/deliveries/{made.erased}/retry" not in erased


def test_a_skipped_delivery_says_why(web: Browser, made: Made) -> None:
    page = web.get(DELIVERY.format(made.skipped)).text
    words = "its endpoint or the club&#39;s Webhooks &amp; API module was off"
    assert f'<dd id="skipped-reason">{words}</dd>' in page


@pytest.mark.parametrize(
    "path", ["/settings/granite/webhooks", "/settings/granite/webhooks/{}/deliveries"]
)
def test_the_tables_say_why_and_offer_retry_only_where_it_can_be(
    web: Browser, made: Made, path: str
) -> None:
    page = web.get(path.format(made.endpoint)).text
    expected = {  # each row: its words, and whether it offers Retry
        made.expired: ("(payload expired)", False),
        made.erased: ("(erased at a member&#39;s request)", False),
        made.skipped: ("(its endpoint or the club&#39;s Webhooks &amp; API module was off)", True),
        made.whole: (">dead<", True),
    }
    for delivery_id, (words, retried) in expected.items():
        row = part(page, f'id="delivery-{delivery_id}"')
        assert words in row
        assert (f'id="retry-{delivery_id}"' in row) is retried
