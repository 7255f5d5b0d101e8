"""Payloads kept only as long as a club wants (issue 34, item 2): once an event is older than
its club's ``payload_days`` (never longer than the history, ``CLUBWIRE_RETENTION_DAYS``) and
none of its deliveries is still due, its body is emptied and its persons' digests forgotten,
and its attempts keep nothing of the receivers' answers (which may quote it). Status, codes,
attempts and times stay, so the history still counts true; ``events.payload_removed`` says
``expired``, and Retry and Replay refuse it (``personal_data.refusal``).

Run by retention's pruning (``services.retention``), in batches: each batch of events is a
transaction of its own, chosen along ``ix_events_club_id_created_at_kept``. On PostgreSQL the
chosen events are locked and those locked by another transaction skipped (another worker's
pruning, or an erasure), so several workers share the work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection, Select, delete, exists, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.personal_data import Removed
from clubwire.services import ordered_lines
from clubwire.storage import tables

BATCH = 1000


def expire(
    sessions: sessionmaker[Session],
    now: datetime,
    retention: timedelta,
    batch: int = BATCH,
    keep_going: Callable[[], bool] = lambda: True,
) -> int:
    """Empty the payloads of every club's events older than its payload days at ``now`` (at
    most ``retention``), ``batch`` events per transaction, until none is left (or
    ``keep_going()`` turns false between batches); returns how many were emptied."""
    total = 0
    for club_id, days in _clubs_with_payload_days(sessions):
        cutoff = now - min(timedelta(days=days), retention)
        total += _drain(sessions, club_id, cutoff, batch, keep_going)
    return total


def _clubs_with_payload_days(sessions: sessionmaker[Session]) -> Sequence[tuple[str, int]]:
    c = tables.clubs.c
    with sessions() as session:
        found = session.execute(select(c.id, c.payload_days).where(c.payload_days.is_not(None)))
        return [(club_id, days) for club_id, days in found]


def _drain(
    sessions: sessionmaker[Session],
    club_id: str,
    cutoff: datetime,
    batch: int,
    keep_going: Callable[[], bool],
) -> int:
    total = 0
    while keep_going():
        with sessions.begin() as session:
            emptied = _empty(session.connection(), club_id, cutoff, batch)
        total += emptied
        if not emptied:
            break
    return total


def _empty(connection: Connection, club_id: str, cutoff: datetime, batch: int) -> int:
    """Empty one batch of the club's events older than ``cutoff``; returns how many."""
    chosen = list(connection.scalars(_expiring(club_id, cutoff, batch)))
    if not chosen:
        return 0
    e, d, a = tables.events.c, tables.deliveries.c, tables.attempts.c
    connection.execute(
        update(tables.events)
        .where(e.id.in_(chosen))
        .values(body=b"", payload_removed=Removed.EXPIRED)
    )
    connection.execute(
        delete(tables.event_people).where(tables.event_people.c.event_id.in_(chosen))
    )
    answered = select(d.id).where(d.event_id.in_(chosen))
    connection.execute(
        update(tables.attempts)
        .where(a.delivery_id.in_(answered))
        .values(excerpt="", retry_after=None)
    )
    return len(chosen)


def _expiring(club_id: str, cutoff: datetime, batch: int) -> Select[tuple[str]]:
    """The club's oldest events older than ``cutoff`` whose payload is whole and which no
    delivery still waits to send (pending, brought forward by Retry, or held in its line):
    read along the partial index of kept payloads; locked, skipping those another
    transaction holds."""
    e, d = tables.events.c, tables.deliveries.c
    waiting = or_(d.next_attempt_at.is_not(None), ordered_lines.in_line(d.id))
    due = exists().where(d.event_id == e.id, waiting)
    return (
        select(e.id)
        .where(
            e.club_id == club_id,
            e.created_at < cutoff,
            e.payload_removed.is_(None),
            ~due,
        )
        .order_by(e.created_at)
        .limit(batch)
        .with_for_update(skip_locked=True)
    )
