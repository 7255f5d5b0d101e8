"""The deliveries page stays fast however many deliveries an endpoint has (issue 15, item
6): each of its queries, as the service runs them, is planned on both databases as a walk
down an index in created order that stops after a page, never a sort of the whole set.
SQLite walks ``ix_deliveries_endpoint_id_created_at_id`` (migration 0012: with the former
(endpoint_id, created_at) index and statistics it scanned and sorted them all). PostgreSQL
walks that one or, when the endpoint holds much of its club's deliveries, the club's
(club_id, created_at) index, sorting only deliveries created in the same microsecond (an
"Incremental Sort" on the presorted created time), or sorts the few rows an index range left
(just newer than a cursor near the newest).

Measured once on the 2-core test machine, a million deliveries of one endpoint (``ANALYZE``d),
the newest page, the next older, back newer: PostgreSQL 5.3, 6.0, 2.1 ms; SQLite 4.0, 5.0,
1.2 ms. Filtered (dead, one kind, a day's window of 170,000): PostgreSQL 3.7, 6.3, 5.6 ms;
SQLite 7.3, 34.8, 42.3 ms."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from sqlalchemy import event, insert, text
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from clubwire import ids
from clubwire.domain.delivering import Status
from clubwire.domain.delivery_pages import PAGE_SIZE, Filters
from clubwire.services.delivery import deliveries
from clubwire.settings import Settings
from clubwire.storage.models import Club, Delivery, Endpoint
from tests.factories import EPOCH, make_club, make_delivery, make_endpoint

IN_CREATED_ORDER = re.compile(r"ix_deliveries_(endpoint_id_created_at_id|club_id_created_at)\b")
MANY = 20_000
# A plain sort, with the rows PostgreSQL expects it to sort: only a page's worth may be (the
# rows just newer than a cursor near the newest, which an index range has already bounded).
_SORT = re.compile(r"(?<!Incremental )Sort  \(cost=\S+ rows=(\d+)")
A_PAGE = 2 * PAGE_SIZE


def add_deliveries(session: Session, club: Club, endpoint: Endpoint, count: int) -> None:
    """``count`` deliveries of one event, a second apart, in statuses by turn."""
    event_id = session.get_one(Delivery, make_delivery(session, club, endpoint, EPOCH)).event_id
    statuses = (Status.SUCCEEDED, Status.DEAD, Status.SKIPPED)
    rows = [
        {
            "id": ids.new_id("dlv"),
            "club_id": club.id,
            "event_id": event_id,
            "endpoint_id": endpoint.id,
            "status": statuses[n % 3],
            "created_at": EPOCH + timedelta(seconds=n // 2),
            "updated_at": EPOCH,
        }
        for n in range(count)
    ]
    for start in range(0, count, 10_000):
        session.execute(insert(Delivery), rows[start : start + 10_000])
    session.execute(text("ANALYZE"))


@contextmanager
def recorded(session: Session) -> Iterator[list[tuple[str, Any]]]:
    """The SELECTs the session runs, with their parameters."""
    seen: list[tuple[str, Any]] = []

    def record(_c: Connection, _k: object, statement: str, parameters: Any, *_: object) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    engine = session.get_bind()
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def plan(session: Session, statement: str, parameters: Any) -> str:
    connection = session.connection()
    cursor = connection.connection.cursor()
    if connection.dialect.name == "sqlite":
        cursor.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())
    cursor.execute(f"EXPLAIN {statement}", parameters)
    return "\n".join(str(row[0]) for row in cursor.fetchall())


def test_every_page_query_walks_the_index_and_sorts_nothing_whole(
    session: Session, settings: Settings
) -> None:
    club = make_club(session)
    endpoint, _ = make_endpoint(session, club, settings)
    other, _ = make_endpoint(session, club, settings)
    add_deliveries(session, club, other, MANY)
    add_deliveries(session, club, endpoint, MANY)
    session.commit()
    window = Filters(Status.DEAD, "registration.created", EPOCH, EPOCH + timedelta(hours=2))

    with recorded(session) as seen:
        for filters in (Filters(), window):
            first = deliveries.page_of_deliveries(session, club.id, endpoint.id, filters)
            assert first.older is not None
            second = deliveries.page_of_deliveries(
                session, club.id, endpoint.id, filters, older_than=first.older
            )
            assert second.newer is not None
            deliveries.page_of_deliveries(
                session, club.id, endpoint.id, filters, newer_than=second.newer
            )

    pages = [(s, p) for s, p in seen if "FROM deliveries" in s and "ORDER BY" in s]
    assert len(pages) >= 10
    for statement, parameters in pages:
        shown = plan(session, statement, parameters)
        assert IN_CREATED_ORDER.search(shown), shown
        if session.get_bind().dialect.name == "sqlite":
            assert "ix_deliveries_endpoint_id_created_at_id" in shown, shown
        assert "USE TEMP B-TREE FOR ORDER BY" not in shown, shown
        assert all(int(rows) <= A_PAGE for rows in _SORT.findall(shown)), shown
