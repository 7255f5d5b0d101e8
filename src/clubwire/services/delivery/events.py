"""Publishing club events: the event and its deliveries commit with the caller's own change."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Protocol

import orjson
from pydantic import BaseModel
from sqlalchemy import bindparam, insert, select
from sqlalchemy.orm import Session

from clubwire import errors, ids, tracing
from clubwire.domain import event_batches, event_catalog, ordering, personal_data
from clubwire.domain.delivering import SkipReason, Status
from clubwire.domain.ordering import Place
from clubwire.services import ordered_lines
from clubwire.services.delivery import subscriptions
from clubwire.storage import database, queue, tables
from clubwire.storage.models import Club, Event

MAX_IDEMPOTENCY_KEY = event_batches.MAX_IDEMPOTENCY_KEY
_c = tables.ordering_counters.c


class Subscribed(Protocol):
    """An endpoint as a fan-out needs it (a ``subscriptions.Subscriber``, or the model)."""

    @property
    def id(self) -> str: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def ordered(self) -> bool: ...


def publish(
    session: Session,
    club: Club,
    kind: str,
    data: object,
    now: datetime,
    idempotency_key: str | None = None,
) -> tuple[Event, bool]:
    """``publish_to`` the club."""
    return publish_to(session, club.id, kind, data, now, idempotency_key)


def publish_to(
    session: Session,
    club_id: str,
    kind: str,
    data: object,
    now: datetime,
    idempotency_key: str | None = None,
) -> tuple[Event, bool]:
    """Record an event and one delivery per subscribed endpoint, in the caller's transaction.

    Returns the event and whether it is new: a repeated ``idempotency_key`` returns the first
    event and creates nothing; the same key with another kind or other data is refused, so a
    key reused by mistake cannot swallow an event. While the club's module is off the event
    is recorded with no deliveries; an endpoint that is off gets its delivery as ``skipped``.
    The subscriptions are those as of the event's insert (``subscriptions``): kept in
    memory, read again only after a change.
    """
    payload = checked(kind, data, idempotency_key)
    with tracing.publishing(kind, club_id) as span:
        if idempotency_key is not None:
            earlier = _by_idempotency_key(session, club_id, idempotency_key)
            if earlier is not None:
                span.published(earlier.id, 0, repeated=True)
                return repeated(earlier, kind, payload), False
        event, version = _recorded(session, club_id, kind, payload, now, idempotency_key)
        endpoints = subscriptions.subscribed(session, club_id, kind, version)
        fan_out(session, event, endpoints, now)
        span.published(event.id, len(endpoints), repeated=False)
    return event, True


def record_event(
    session: Session,
    club: Club,
    kind: str,
    payload: BaseModel,
    now: datetime,
    idempotency_key: str | None = None,
) -> Event:
    """Store the envelope, serialised once: the exact bytes every attempt will send, with the
    event's place among its resource's events (its key's next sequence: publishes of one key
    follow one another from here to their commit), and the digests of the persons it
    carries (an erasure finds them by these, ADR 0016), and the trace context it is
    published in (with tracing on: every attempt of it continues that trace). The row is
    written at once, by one INSERT (the unit of work's flush cost a publish an eighth of its
    CPU); the event returned is not in the session."""
    return _recorded(session, club.id, kind, payload, now, idempotency_key)[0]


def _recorded(
    session: Session,
    club_id: str,
    kind: str,
    payload: BaseModel,
    now: datetime,
    idempotency_key: str | None,
) -> tuple[Event, int]:
    """``record_event``, and ``api_changes.version`` as its INSERT saw it (the same round
    trip)."""
    data = payload.model_dump(mode="json", by_alias=True)
    key = ordering.key_of(kind, data)
    place = None if key is None else next_place(session, club_id, key)
    values = event_row(club_id, kind, data, now, idempotency_key, place)
    version = session.execute(_INSERT_EVENT, values).scalar_one()
    people = people_rows(values["id"], club_id, kind, data)
    if people:
        session.execute(insert(tables.event_people), people)
    return Event(**values), int(version)


_INSERT_EVENT = insert(tables.events).returning(
    select(tables.api_changes.c.version).scalar_subquery()
)


def event_row(
    club_id: str,
    kind: str,
    data: dict[str, Any],
    now: datetime,
    idempotency_key: str | None,
    place: Place | None,
) -> dict[str, Any]:
    """A new event's row: its envelope, its place, the trace context current."""
    event_id = ids.new_id("evt")
    trace = tracing.current()
    return {
        "id": event_id,
        "club_id": club_id,
        "kind": kind,
        "body": event_catalog.envelope(event_id, kind, now, club_id, data, place),
        "created_at": now,
        "idempotency_key": idempotency_key,
        "ordering_key": None if place is None else place.key,
        "sequence": None if place is None else place.sequence,
        "traceparent": None if trace is None else trace.traceparent,
        "tracestate": None if trace is None else trace.tracestate,
    }


def people_rows(
    event_id: str, club_id: str, kind: str, data: dict[str, Any]
) -> list[dict[str, str]]:
    """The digests of the persons an event carries, as rows (ADR 0016)."""
    people = personal_data.digests(club_id, kind, data)
    return [{"event_id": event_id, "digest": found, "club_id": club_id} for found in people]


def _counting(dialect: str) -> Any:
    """The next sequence of a club's key: its counter, made or moved on, and locked until the
    publish commits (built once per database: building it cost a publish a tenth of a ms)."""
    statement = database.insert_of(dialect)(tables.ordering_counters).values(
        club_id=bindparam("club"), ordering_key=bindparam("key"), last=1
    )
    upsert = statement.on_conflict_do_update(
        index_elements=[_c.club_id, _c.ordering_key], set_={"last": _c.last + 1}
    )
    return upsert.returning(_c.last)


_NEXT = {dialect: _counting(dialect) for dialect in ("postgresql", "sqlite")}


def next_place(session: Session, club_id: str, key: str) -> Place:
    """The key's next place in the club: 1 for its first event. Publishes of one key wait
    for one another here, so none is given twice and none is skipped (a publish rolled back
    gives its number back)."""
    connection = session.connection()
    statement = _NEXT[connection.dialect.name]
    return Place(key, connection.execute(statement, {"club": club_id, "key": key}).scalar_one())


def fan_out(session: Session, event: Event, endpoints: Sequence[Subscribed], now: datetime) -> None:
    """One delivery per endpoint, due now (or skipped where the endpoint is off); the
    endpoints' queue heads say so, which wakes the workers."""
    mark_due(session, fanned_out(session, event, endpoints, now), now)


def fanned_out(
    session: Session, event: Event, endpoints: Sequence[Subscribed], now: datetime
) -> list[str]:
    """``fan_out`` but the heads: the endpoints it made a delivery due at. At an ordered
    endpoint the delivery goes in order: it is held behind the key's delivery still to go,
    if there is one (``ordering``)."""
    if not endpoints:
        return []
    key = event.ordering_key
    ordered = {e.id for e in endpoints if e.enabled and e.ordered} if key is not None else set()
    held = ordered_lines.busy(session, ordered, key) if key is not None and ordered else set()
    rows = delivery_rows(event, endpoints, now, ordered, held)
    session.execute(insert(tables.deliveries), rows)
    if ordered and key is not None and event.sequence is not None:
        lined = sorted(
            ((row["id"], row["endpoint_id"]) for row in rows if row["ordering_key"]),
            key=lambda pair: pair[1],
        )
        ordered_lines.line_up(session, lined, Place(key, event.sequence))
    return [endpoint.id for endpoint in endpoints if endpoint.enabled and endpoint.id not in held]


def mark_due(session: Session, endpoint_ids: Collection[str], now: datetime) -> None:
    """The endpoints' queue heads say they have deliveries due now (which wakes workers)."""
    if endpoint_ids:
        connection = session.connection()
        queue.on(connection).mark_due(connection, endpoint_ids, now)


def delivery_rows(
    event: Event,
    endpoints: Sequence[Subscribed],
    now: datetime,
    ordered: Collection[str] = (),
    held: Collection[str] = (),
) -> list[dict[str, Any]]:
    """An event's new deliveries, one per endpoint: due now where the endpoint is on and not
    ``held`` (behind its key's delivery still to go), skipped where it is off; in line
    where the endpoint is ``ordered``."""
    return [
        {
            "id": ids.new_sorted_id("dlv", now),
            "club_id": event.club_id,
            "event_id": event.id,
            "endpoint_id": endpoint.id,
            "status": Status.PENDING if endpoint.enabled else Status.SKIPPED,
            "skipped_reason": None if endpoint.enabled else SkipReason.OFF,
            "attempt": 0,
            "next_attempt_at": now if endpoint.enabled and endpoint.id not in held else None,
            "next_trigger": "scheduled",
            "created_at": now,
            "updated_at": now,
            "ordering_key": event.ordering_key if endpoint.id in ordered else None,
        }
        for endpoint in endpoints
    ]


def checked(kind: str, data: object, idempotency_key: str | None) -> BaseModel:
    """The event's data, validated against its kind; refused (``InvalidInput``, in words)
    with a kind that cannot be published, data not of its kind, or a key not a key."""
    if kind == "ping":
        raise errors.InvalidInput("ping is sent only by Send test; it cannot be published.")
    payload = _validated(kind, data)
    _check_idempotency_key(idempotency_key)
    return payload


def _validated(kind: str, data: object) -> BaseModel:
    try:
        return event_catalog.validate(kind, data)
    except (event_catalog.UnknownKind, event_catalog.InvalidData) as exc:
        raise errors.InvalidInput(str(exc)) from None


def _check_idempotency_key(key: str | None) -> None:
    if key is not None and not (0 < len(key) <= MAX_IDEMPOTENCY_KEY and key.isprintable()):
        raise errors.InvalidInput(
            f"An idempotency key has 1–{MAX_IDEMPOTENCY_KEY} printable characters."
        )


def repeated(earlier: Event, kind: str, payload: BaseModel) -> Event:
    """The earlier event, if this publish repeats it (the same kind and data)."""
    data = payload.model_dump(mode="json", by_alias=True)
    if earlier.kind == kind and orjson.loads(earlier.body)["data"] == data:
        return earlier
    raise errors.IdempotencyKeyReused(
        f"The idempotency key was first used for {earlier.id} ({earlier.kind}) with other "
        "data; a repeat must send the same event kind and data, a new event a new key."
    )


def _by_idempotency_key(session: Session, club_id: str, key: str) -> Event | None:
    query = select(Event).where(Event.club_id == club_id, Event.idempotency_key == key)
    return session.scalar(query)
