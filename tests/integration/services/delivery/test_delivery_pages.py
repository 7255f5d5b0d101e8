"""An endpoint's deliveries page by page (issue 15, item 6) on both databases: keyset pages
over 120 deliveries (many created in the same microsecond) with no duplicate and no gap both
ways, filters that combine, the bounds, and another club's or endpoint's deliveries never
shown."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from clubwire.domain import delivery_pages
from clubwire.domain.delivering import Status
from clubwire.domain.delivery_pages import Cursor, Filters
from clubwire.services.delivery import deliveries
from clubwire.services.delivery.deliveries import DeliveryPage
from clubwire.settings import Settings
from clubwire.storage.models import Club, Endpoint
from tests.factories import EPOCH, make_club, make_delivery, make_endpoint

KINDS = ("registration.created", "payment.completed")
STATUSES = (Status.DEAD, Status.SUCCEEDED, Status.PENDING)
COUNT = 120


def _created(n: int) -> datetime:
    """Three deliveries a minute, the same microsecond each: only their ids order them."""
    return EPOCH + timedelta(minutes=n // 3)


@pytest.fixture
def made(session: Session, settings: Settings) -> tuple[Club, Endpoint, list[tuple[str, int]]]:
    """The club, its endpoint, and its deliveries as (id, n), with kind and status from n."""
    club = make_club(session)
    endpoint, _ = make_endpoint(session, club, settings, kinds=KINDS)
    other, _ = make_endpoint(session, club, settings, kinds=KINDS)
    rival = make_club(session, "rocks")
    rivals, _ = make_endpoint(session, rival, settings, kinds=KINDS)
    made = [
        (make_delivery(session, club, endpoint, _created(n), STATUSES[n % 3], KINDS[n % 2]), n)
        for n in range(COUNT)
    ]
    make_delivery(session, club, other, _created(5))
    make_delivery(session, rival, rivals, _created(5))
    session.commit()
    return club, endpoint, made


def _newest_first(made: list[tuple[str, int]]) -> list[str]:
    return [delivery_id for delivery_id, _ in sorted(made, key=lambda m: (m[1] // 3, m[0]))][::-1]


def _walk(session: Session, club: Club, endpoint: Endpoint, filters: Filters) -> list[DeliveryPage]:
    """Every page from the newest, following Older."""
    pages = [deliveries.page_of_deliveries(session, club.id, endpoint.id, filters)]
    while pages[-1].older is not None:
        older = Cursor.decode(pages[-1].older.encode())  # as a link carries it
        pages.append(
            deliveries.page_of_deliveries(session, club.id, endpoint.id, filters, older_than=older)
        )
    return pages


def _ids(pages: list[DeliveryPage]) -> list[str]:
    return [delivery.id for page in pages for delivery in page.rows]


def test_older_pages_hold_every_delivery_once_newest_first_and_newer_goes_back(
    session: Session, made: tuple[Club, Endpoint, list[tuple[str, int]]]
) -> None:
    club, endpoint, ids = made
    pages = _walk(session, club, endpoint, Filters())

    assert [len(page.rows) for page in pages] == [50, 50, 20]
    assert _ids(pages) == _newest_first(ids)
    assert pages[0].newer is None
    assert pages[-1].older is None
    for before, after in itertools.pairwise(pages):
        assert after.newer is not None
        back = deliveries.page_of_deliveries(
            session, club.id, endpoint.id, Filters(), newer_than=after.newer
        )
        assert back == before


def test_filters_combine(
    session: Session, made: tuple[Club, Endpoint, list[tuple[str, int]]]
) -> None:
    club, endpoint, ids = made
    since, until = _created(30), _created(90)  # n from 30 to 89
    filters = Filters(Status.DEAD, "payment.completed", since, until)

    found = _ids(_walk(session, club, endpoint, filters))

    wanted = [(i, n) for i, n in ids if n % 3 == 0 and n % 2 == 1 and 30 <= n < 90]
    assert found == _newest_first(wanted)
    assert len(found) == 10


def test_a_page_ends_exactly_at_the_last_delivery(
    session: Session, made: tuple[Club, Endpoint, list[tuple[str, int]]]
) -> None:
    club, endpoint, _ = made
    pages = _walk(session, club, endpoint, Filters(Status.SUCCEEDED))  # 40 deliveries
    exact = deliveries.page_of_deliveries(session, club.id, endpoint.id, Filters(), size=COUNT)

    assert [len(page.rows) for page in pages] == [40]
    assert pages[0].older is None
    assert pages[0].newer is None
    assert len(exact.rows) == COUNT
    assert exact.older is None


def test_the_until_minute_is_included_and_past_the_ends_is_empty(
    session: Session, made: tuple[Club, Endpoint, list[tuple[str, int]]]
) -> None:
    club, endpoint, ids = made
    minute = delivery_pages.until(_created(3).strftime("%Y-%m-%dT%H:%MZ"))
    last = deliveries.page_of_deliveries(
        session, club.id, endpoint.id, Filters(since=_created(3), until=minute)
    )
    oldest = Cursor(_created(0), "dlv_0")  # before every id of the first minute
    none = deliveries.page_of_deliveries(
        session, club.id, endpoint.id, Filters(), older_than=oldest
    )

    assert sorted(d.id for d in last.rows) == sorted(i for i, n in ids if n // 3 == 1)
    assert none == DeliveryPage([], None, None)


def test_another_endpoints_or_clubs_id_shows_nothing(
    session: Session, made: tuple[Club, Endpoint, list[tuple[str, int]]]
) -> None:
    club, endpoint, _ = made
    rival = session.query(Club).filter_by(slug="rocks").one()

    theirs = deliveries.page_of_deliveries(session, rival.id, endpoint.id, Filters())
    mine = _ids(_walk(session, club, endpoint, Filters()))

    assert theirs.rows == []
    assert len(mine) == COUNT
