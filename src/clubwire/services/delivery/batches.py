"""Publishing a batch of events in one transaction: each event as ``events.publish`` makes it
(its checks, its span, its answer, its deliveries), written together: one statement for the
batch's places, one for its events, one for its deliveries, one for the queue heads (ADR
0019). A refused event refuses the batch before anything is written, the error saying which
(``item``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from clubwire import errors, tracing
from clubwire.domain import ordering
from clubwire.domain.event_batches import BatchEvent
from clubwire.domain.ordering import Place
from clubwire.services import ordered_lines
from clubwire.services.delivery import events, subscriptions
from clubwire.storage import database, tables
from clubwire.storage.models import Event

_c = tables.ordering_counters.c


@dataclass(frozen=True, slots=True)
class _New:
    """An event the batch makes: its kind and its data, validated (JSON values)."""

    kind: str
    data: dict[str, Any]
    idempotency_key: str | None


Planned = _New | Event | int  # made; a repeat of an earlier event; of the batch's Nth


def publish_batch(
    session: Session, club_id: str, batch: Sequence[BatchEvent], now: datetime
) -> list[tuple[Event, bool]]:
    """Publish each event of ``batch`` as ``events.publish`` would, in order, in the
    caller's transaction: all of them, or none when one is refused. A key given twice finds
    the first one's event, as a key repeated by a later request would."""
    plan = _planned(session, club_id, batch)
    places = iter(_places(session, club_id, [e for e in plan if isinstance(e, _New)]))
    endpoints = subscriptions.of_club(session, club_id)
    published: list[tuple[Event, bool]] = []
    rows: list[dict[str, Any]] = []
    people: list[dict[str, str]] = []
    for entry in plan:
        kind = entry.kind if isinstance(entry, (_New, Event)) else published[entry][0].kind
        with tracing.publishing(kind, club_id) as span:
            if isinstance(entry, _New):
                key, place = entry.idempotency_key, next(places)
                row = events.event_row(club_id, kind, entry.data, now, key, place)
                rows.append(row)
                people.extend(events.people_rows(row["id"], club_id, kind, entry.data))
                published.append((Event(**row), True))
                span.published(row["id"], len(endpoints.of(kind)), repeated=False)
            else:
                earlier = entry if isinstance(entry, Event) else published[entry][0]
                published.append((earlier, False))
                span.published(earlier.id, 0, repeated=True)
    if rows:
        session.execute(insert(tables.events), rows)
    if people:
        session.execute(insert(tables.event_people), people)
    _fan_out(session, [event for event, new in published if new], endpoints, now)
    return published


def _planned(session: Session, club_id: str, batch: Sequence[BatchEvent]) -> list[Planned]:
    """What each event of the batch is: new, or a repeat (of an earlier request's event or
    of the batch's own); every refusal is found here, before anything is written."""
    earlier = _by_idempotency_keys(session, club_id, batch)
    first: dict[str, int] = {}  # a key's first place in the batch
    plan: list[Planned] = []
    for index, item in enumerate(batch):
        with _at(index):
            payload = events.checked(item.event, item.data, item.idempotency_key)
            data = payload.model_dump(mode="json", by_alias=True)
            key = item.idempotency_key
            if key is not None and key in earlier:
                plan.append(events.repeated(earlier[key], item.event, payload))
            elif key is not None and key in first:
                plan.append(_repeat_in_batch(plan, first[key], item.event, data))
            else:
                plan.append(_New(item.event, data, key))
                if key is not None:
                    first[key] = index
    return plan


def _repeat_in_batch(plan: Sequence[Planned], index: int, kind: str, data: object) -> int:
    made = plan[index]
    if isinstance(made, _New) and made.kind == kind and made.data == data:
        return index
    raise errors.IdempotencyKeyReused(
        "The idempotency key was first used earlier in this batch with another kind or other "
        "data; a repeat must send the same event kind and data, a new event a new key."
    )


@contextmanager
def _at(index: int) -> Iterator[None]:
    """A refusal raised here names the batch's event ``index`` (0 first)."""
    try:
        yield
    except errors.ClubwireError as refused:
        refused.item = index
        raise


def _by_idempotency_keys(
    session: Session, club_id: str, batch: Sequence[BatchEvent]
) -> dict[str, Event]:
    """The club's events published earlier with the batch's keys, in one query."""
    keys = {item.idempotency_key for item in batch if item.idempotency_key is not None}
    if not keys:
        return {}
    query = select(Event).where(Event.club_id == club_id, Event.idempotency_key.in_(keys))
    return {
        event.idempotency_key: event for event in session.scalars(query) if event.idempotency_key
    }


def _places(session: Session, club_id: str, made: Sequence[_New]) -> list[Place | None]:
    """Each new event's place among its key's events, in the batch's order: every key's
    counter moved on by its count in one statement, in the keys' order (so that batches
    lock counters in one order), and locked until the batch commits."""
    keys = [ordering.key_of(entry.kind, entry.data) for entry in made]
    counts = Counter(key for key in keys if key is not None)
    if not counts:
        return [None] * len(made)
    connection = session.connection()
    statement = database.insert_of(connection.dialect.name)(tables.ordering_counters)
    values = [{"club_id": club_id, "ordering_key": k, "last": counts[k]} for k in sorted(counts)]
    upsert = statement.values(values).on_conflict_do_update(
        index_elements=[_c.club_id, _c.ordering_key],
        set_={"last": _c.last + statement.excluded.last},
    )
    moved = connection.execute(upsert.returning(_c.ordering_key, _c.last))
    last: dict[str, int] = {key: count for key, count in moved}
    given = {key: last[key] - counts[key] for key in counts}  # the sequence before the first
    places: list[Place | None] = []
    for key in keys:
        if key is None:
            places.append(None)
        else:
            given[key] += 1
            places.append(Place(key, given[key]))
    return places


def _fan_out(
    session: Session, new: Sequence[Event], endpoints: subscriptions.Subscriptions, now: datetime
) -> None:
    """The new events' deliveries, and the queue heads. An event that goes in order to an
    endpoint is fanned out on its own, after the events before it (its delivery may wait
    behind theirs); the endpoints' rows that needs are held first, all of them, in one
    order."""
    by_kind = {kind: endpoints.of(kind) for kind in {event.kind for event in new}}
    in_order = {e.id for to in by_kind.values() for e in to if e.enabled and e.ordered}
    ordered_lines.lock_endpoints(session, in_order, shared=True)
    rows: list[dict[str, Any]] = []
    due: set[str] = set()
    for event in new:
        to = by_kind[event.kind]
        if any(endpoint.id in in_order for endpoint in to):
            due.update(events.fanned_out(session, event, to, now))
        else:
            rows.extend(events.delivery_rows(event, to, now))
            due.update(endpoint.id for endpoint in to if endpoint.enabled)
    if rows:
        session.execute(insert(tables.deliveries), rows)
    events.mark_due(session, due, now)
