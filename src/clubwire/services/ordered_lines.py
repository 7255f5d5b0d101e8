"""Ordered delivery (ADR 0017): the lines in which an ordered endpoint's deliveries of one
ordering key wait their turn.

A delivery goes in order when its endpoint was ordered when it was queued: its row carries
its event's ordering key, and while it has an attempt to come it stands in its line
(``ordered_lines``), by sequence. Only the first of a line is due; the others are held (no
``next_attempt_at``). When the first succeeds or dies, the record that says so takes it out
of its line and releases the next at once, telling it the sequence it missed if the first
died.

Every change to an endpoint's lines holds its endpoint's row first, so that they happen
one after another: a publish holds it shared (publishes of one key follow one another
anyway, through the key's counter: ``events``), a record, a requeue, an erasure and a
switch exclusively. Then deliveries, lines, and last the queue heads: the order of every
transaction here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, and_, delete, exists, func, insert, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from clubwire.domain.delivering import Status
from clubwire.domain.ordering import Place
from clubwire.storage import queue, tables

CHUNK = 1000  # delivery ids one statement names at most
_l = tables.ordered_lines.c
_d = tables.deliveries.c
_e = tables.events.c
_p = tables.endpoints.c


def lock_endpoints(session: Session, endpoint_ids: Collection[str], shared: bool = False) -> None:
    """Hold these endpoints' rows (in id order) until the transaction ends: ``shared`` for a
    publish, exclusively for anything else that changes their lines (SQLite has one writer:
    nothing to do)."""
    if not endpoint_ids or session.get_bind().dialect.name == "sqlite":
        return
    chosen = select(_p.id).where(_p.id.in_(sorted(endpoint_ids))).order_by(_p.id)
    session.execute(chosen.with_for_update(read=shared, key_share=not shared))


def lock_lines_of(session: Session, which: ColumnElement[bool]) -> None:
    """Hold the endpoints whose lines hold deliveries matching ``which``, before those
    deliveries change (read from the lines: a few rows, however many deliveries match)."""
    if session.get_bind().dialect.name == "sqlite":
        return
    lined = select(_l.endpoint_id).join(tables.deliveries, _d.id == _l.delivery_id)
    lock_endpoints(session, set(session.scalars(lined.where(which).distinct())))


def busy(session: Session, endpoint_ids: Collection[str], key: str) -> set[str]:
    """Of these ordered endpoints, those with a delivery of ``key`` still to go: a new one
    waits behind it. Their rows are held first, then read in a statement of its own, which
    sees what a record that held one committed meanwhile."""
    lock_endpoints(session, endpoint_ids, shared=True)
    query = select(_l.endpoint_id).where(_l.endpoint_id.in_(endpoint_ids), _l.ordering_key == key)
    return set(session.scalars(query.distinct()))


def line_up(session: Session, deliveries: Iterable[tuple[str, str]], place: Place) -> None:
    """Put these new deliveries (id, endpoint) of an event at ``place`` in their lines."""
    rows = [
        {"delivery_id": delivery_id, "endpoint_id": endpoint_id}
        | {"ordering_key": place.key, "sequence": place.sequence}
        for delivery_id, endpoint_id in deliveries
    ]
    if rows:
        session.execute(insert(tables.ordered_lines), rows)


def finished(
    session: Session, delivery_ids: Collection[str], missed: Collection[str], now: datetime
) -> list[str]:
    """Take these deliveries, whose last attempt is over, out of their lines and release the
    next of each line at once (those after one in ``missed``, which died without reaching
    its receiver, are told its sequence). The endpoints whose deliveries were released."""
    if not delivery_ids:
        return []
    left = session.execute(
        delete(tables.ordered_lines)
        .where(_l.delivery_id.in_(sorted(delivery_ids)))
        .returning(_l.delivery_id, _l.endpoint_id, _l.ordering_key, _l.sequence)
    ).all()
    lines: dict[tuple[str, str], int | None] = {}
    for delivery_id, endpoint_id, key, sequence in left:
        told = sequence if delivery_id in missed else None
        kept = lines.get((endpoint_id, key))
        lines[endpoint_id, key] = max((s for s in (kept, told) if s is not None), default=None)
    connection = session.connection()
    return queue.on(connection).release(connection, lines, now)


def leave(session: Session, endpoint_ids: Collection[str]) -> None:
    """Take these endpoints' skipped deliveries (their endpoint or module went off) out of
    their lines: every delivery of theirs still to go was skipped with them."""
    skipped = exists().where(_d.id == _l.delivery_id, _d.status == Status.SKIPPED)
    chosen = _l.endpoint_id.in_(sorted(endpoint_ids))
    session.execute(delete(tables.ordered_lines).where(chosen, skipped))


def in_line(delivery_id: ColumnElement[str] | InstrumentedAttribute[str]) -> ColumnElement[bool]:
    """Whether the delivery stands in a line (held, or first and due)."""
    return exists().where(_l.delivery_id == delivery_id)


def enter(session: Session, endpoint_id: str, delivery_ids: Sequence[str], now: datetime) -> None:
    """Deliveries of an ordered endpoint just queued again (Retry, Replay, resend skipped):
    each goes in order, in its line by its sequence; of each line only the first is due.
    The endpoint's row is already held."""
    for chosen in _chunks(delivery_ids):
        _line_up_again(session, chosen)
    if delivery_ids:
        settle(session, endpoint_id, now)


def _line_up_again(session: Session, delivery_ids: Sequence[str]) -> None:
    chosen = (_d.id.in_(delivery_ids), _e.id == _d.event_id, _e.ordering_key.is_not(None))
    session.execute(
        update(tables.deliveries).where(*chosen).values(ordering_key=_e.ordering_key),
        execution_options={"synchronize_session": False},
    )
    rows = select(_d.id, _d.endpoint_id, _e.ordering_key, _e.sequence).where(*chosen)
    rows = rows.where(~in_line(_d.id))
    columns = ["delivery_id", "endpoint_id", "ordering_key", "sequence"]
    session.execute(insert(tables.ordered_lines).from_select(columns, rows))


def _chunks(delivery_ids: Sequence[str]) -> Iterator[Sequence[str]]:
    """The ids, as many at a time as one statement names (SQLite takes 32,766 values)."""
    for start in range(0, len(delivery_ids), CHUNK):
        yield delivery_ids[start : start + CHUNK]


def settle(session: Session, endpoint_id: str, now: datetime) -> None:
    """Of each of the endpoint's lines, hold all but the first and make the first due (an
    attempt already on its way is not called back)."""
    earlier = tables.ordered_lines.alias("earlier")
    ahead = exists().where(
        earlier.c.endpoint_id == _l.endpoint_id,
        earlier.c.ordering_key == _l.ordering_key,
        earlier.c.sequence < _l.sequence,
    )
    lines = select(_l.delivery_id).where(_l.endpoint_id == endpoint_id)
    options = {"synchronize_session": False}
    held = _d.id.in_(lines.where(ahead))
    session.execute(
        update(tables.deliveries)
        .where(held, _d.next_attempt_at.is_not(None))
        .values(next_attempt_at=None, updated_at=now),
        execution_options=options,
    )
    first = _d.id.in_(lines.where(~ahead))
    session.execute(
        update(tables.deliveries)
        .where(first, _d.next_attempt_at.is_(None))
        .values(next_attempt_at=now, updated_at=now),
        execution_options=options,
    )


def switch(session: Session, endpoint_id: str, ordered: bool, now: datetime) -> None:
    """The endpoint's row is held and its ``ordered`` changed: the deliveries not yet
    attempted follow the new way. Ordered: those waiting for their first attempt go in their
    lines; an attempt already made keeps its own schedule. Unordered: the lines are
    dissolved and every held delivery is due at once."""
    if ordered:
        _line_up_waiting(session, endpoint_id, now)
    else:
        _dissolve(session, endpoint_id, now)
    connection = session.connection()
    queue.on(connection).mark_due(connection, [endpoint_id], now)


def _line_up_waiting(session: Session, endpoint_id: str, now: datetime) -> None:
    """The endpoint's deliveries waiting for their first attempt, in their lines. They are
    locked first: a record of an attempt of one, claimed before the switch, either commits
    first (and the delivery has been attempted) or finds it in order and does not move it."""
    waiting = and_(
        _d.endpoint_id == endpoint_id,
        _d.status == Status.PENDING,
        _d.attempt == 0,
        _d.next_attempt_at.is_not(None),
        _d.ordering_key.is_(None),
    )
    chosen = select(_d.id).where(waiting).join(tables.events, _e.id == _d.event_id)
    chosen = chosen.where(_e.ordering_key.is_not(None))
    locked = session.scalars(chosen.with_for_update(of=tables.deliveries)).all()
    enter(session, endpoint_id, locked, now)


def _dissolve(session: Session, endpoint_id: str, now: datetime) -> None:
    left = session.scalars(
        delete(tables.ordered_lines).where(_l.endpoint_id == endpoint_id).returning(_l.delivery_id)
    ).all()
    for chosen in _chunks(left):
        session.execute(
            update(tables.deliveries)
            .where(_d.id.in_(chosen), _d.next_attempt_at.is_(None))
            .values(next_attempt_at=now, updated_at=now),
            execution_options={"synchronize_session": False},
        )


def held_count(session: Session) -> int:
    """How many deliveries of all clubs wait in their lines behind an earlier one (one read
    of the lines, which hold only ordered deliveries with an attempt to come)."""
    query = select(func.count()).select_from(tables.ordered_lines)
    query = query.join(tables.deliveries, _d.id == _l.delivery_id)
    return session.scalar(query.where(_d.next_attempt_at.is_(None))) or 0


def waiting_for(session: Session, delivery_id: str) -> int | None:
    """The sequence a held delivery waits for (the first of its line); None if it is not
    held."""
    line = tables.ordered_lines.alias("line")
    first = (
        select(line.c.sequence)
        .join(tables.ordered_lines, line.c.endpoint_id == _l.endpoint_id)
        .join(tables.deliveries, _d.id == _l.delivery_id)
        .where(
            _l.delivery_id == delivery_id,
            line.c.ordering_key == _l.ordering_key,
            line.c.sequence < _l.sequence,
            _d.next_attempt_at.is_(None),
        )
        .order_by(line.c.sequence)
        .limit(1)
    )
    return session.scalar(first)
