"""Deliveries as people see them: list, look at one, Retry."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, or_, select
from sqlalchemy.orm import Session, joinedload

from clubwire import errors
from clubwire.domain import delivering, personal_data, timestamps
from clubwire.domain.delivering import Status, Trigger
from clubwire.domain.delivery_pages import PAGE_SIZE, Cursor, Filters
from clubwire.services import ordered_lines
from clubwire.storage import queue
from clubwire.storage.models import Attempt, Club, Delivery, Endpoint, Event

DEFAULT_LIMIT = 50
# Each delivery comes with its event's kind and place among its resource's (not the body).
_WITH_KIND = joinedload(Delivery.event).load_only(
    Event.kind, Event.payload_removed, Event.ordering_key, Event.sequence
)


def list_deliveries(
    session: Session,
    club_id: str,
    endpoint_id: str | None = None,
    status: Status | None = None,
    limit: int = DEFAULT_LIMIT,
) -> Sequence[Delivery]:
    """The club's deliveries, newest first."""
    query = select(Delivery).options(_WITH_KIND).where(Delivery.club_id == club_id)
    if endpoint_id is not None:
        query = query.where(Delivery.endpoint_id == endpoint_id)
    if status is not None:
        query = query.where(Delivery.status == status)
    query = query.order_by(Delivery.created_at.desc(), Delivery.id.desc()).limit(limit)
    return session.scalars(query).all()


@dataclass(frozen=True, slots=True)
class DeliveryPage:
    """A page of an endpoint's deliveries, newest first, and where the pages either side of
    it start (None: there is none)."""

    rows: Sequence[Delivery]
    older: Cursor | None
    newer: Cursor | None


def page_of_deliveries(
    session: Session,
    club_id: str,
    endpoint_id: str,
    filters: Filters,
    *,
    older_than: Cursor | None = None,
    newer_than: Cursor | None = None,
    size: int = PAGE_SIZE,
) -> DeliveryPage:
    """The page just older than ``older_than`` (none: the newest), or just newer than
    ``newer_than``: a keyset page, read along ``ix_deliveries_endpoint_id_created_at_id`` and
    stopped after ``size`` + 1 rows, however many deliveries the endpoint has."""
    query = _matching(club_id, endpoint_id, filters)
    if newer_than is not None:
        found = session.scalars(_newer(query, newer_than).limit(size + 1)).all()
        rows = list(reversed(found[:size]))
        more_newer = len(found) > size
        more_older = bool(rows) and _any(session, query, _cursor(rows[-1]), older=True)
    else:
        page = query if older_than is None else query.where(_older_than(older_than))
        found = session.scalars(_newest_first(page).limit(size + 1)).all()
        rows = list(found[:size])
        more_older = len(found) > size
        more_newer = (
            older_than is not None and bool(rows) and _any(session, query, _cursor(rows[0]))
        )
    return DeliveryPage(
        rows,
        _cursor(rows[-1]) if more_older else None,
        _cursor(rows[0]) if more_newer else None,
    )


def _matching(club_id: str, endpoint_id: str, filters: Filters) -> Select[Any]:
    query = select(Delivery).options(_WITH_KIND)
    query = query.where(Delivery.club_id == club_id, Delivery.endpoint_id == endpoint_id)
    if filters.status is not None:
        query = query.where(Delivery.status == filters.status)
    if filters.kind is not None:
        query = query.where(Delivery.event.has(Event.kind == filters.kind))
    if filters.since is not None:
        query = query.where(Delivery.created_at >= filters.since)
    if filters.until is not None:
        query = query.where(Delivery.created_at < filters.until)
    return query


def _newest_first(query: Select[Any]) -> Select[Any]:
    return query.order_by(Delivery.created_at.desc(), Delivery.id.desc())


def _newer(query: Select[Any], cursor: Cursor) -> Select[Any]:
    """Oldest first from just after ``cursor``: the newer page, to be turned round."""
    after = and_(
        Delivery.created_at >= cursor.created_at,
        or_(Delivery.created_at > cursor.created_at, Delivery.id > cursor.id),
    )
    return query.where(after).order_by(Delivery.created_at, Delivery.id)


def _older_than(cursor: Cursor) -> ColumnElement[bool]:
    """Before ``cursor`` in (created, id); the first term bounds the index range."""
    return and_(
        Delivery.created_at <= cursor.created_at,
        or_(Delivery.created_at < cursor.created_at, Delivery.id < cursor.id),
    )


def _any(session: Session, query: Select[Any], cursor: Cursor, older: bool = False) -> bool:
    """Whether a page lies beyond ``cursor`` (one row read along the index)."""
    beyond = _newest_first(query.where(_older_than(cursor))) if older else _newer(query, cursor)
    return session.scalars(beyond.limit(1)).first() is not None


def _cursor(delivery: Delivery) -> Cursor:
    return Cursor(delivery.created_at, delivery.id)


def get_delivery(session: Session, club_id: str, delivery_id: str) -> Delivery:
    delivery = session.scalar(
        select(Delivery)
        .options(_WITH_KIND)
        .where(Delivery.club_id == club_id, Delivery.id == delivery_id)
    )
    if delivery is None:
        raise errors.NotFound(f"This club has no delivery {delivery_id!r}.")
    return delivery


def body_of(session: Session, delivery: Delivery) -> bytes:
    """The body of the event of a delivery the caller has already found for its club
    (``get_delivery``): what its attempts send, unless its payload was removed since."""
    return session.scalars(select(Event.body).where(Event.id == delivery.event_id)).one()


def club_of_delivery(session: Session, delivery_id: str) -> str:
    """The club a delivery belongs to: for operators' tools that name a delivery by id alone."""
    club_id = session.scalar(select(Delivery.club_id).where(Delivery.id == delivery_id))
    if club_id is None:
        raise errors.NotFound(f"There is no delivery {delivery_id!r}.")
    return club_id


def attempts_of(session: Session, delivery: Delivery) -> Sequence[Attempt]:
    """The attempts of a delivery the caller has already found for its club (``get_delivery``)."""
    query = select(Attempt).where(Attempt.delivery_id == delivery.id).order_by(Attempt.number)
    return session.scalars(query).all()


def held(session: Session, shown: Iterable[Delivery]) -> dict[str, int]:
    """Of these deliveries, those held in their line (at an ordered endpoint, behind an
    earlier one of their resource): the sequence each waits for, by delivery id. Only those
    that may be held are looked up."""
    waits = {d.id: ordered_lines.waiting_for(session, d.id) for d in shown if _may_be_held(d)}
    return {delivery_id: seq for delivery_id, seq in waits.items() if seq is not None}


def _may_be_held(delivery: Delivery) -> bool:
    return (
        delivery.ordering_key is not None
        and delivery.status == Status.PENDING
        and delivery.next_attempt_at is None
    )


def due_backlog(session: Session, now: datetime) -> tuple[int, datetime | None]:
    """How many deliveries of all clubs are due (or in flight), and the oldest due time:
    for operators' metrics; one read of the queue's order (unfinished deliveries only)."""
    connection = session.connection()
    return queue.on(connection).backlog(connection, now)


def retry(session: Session, club_id: str, delivery_id: str, now: datetime) -> Delivery:
    """Retry: bring a waiting attempt forward to now, or queue one manual attempt of a
    finished delivery (same delivery and event ids; a fresh signature when it is sent). At
    an ordered endpoint it goes in its line, after the earlier deliveries of its key still
    to go; one held there is not brought forward (the first of its line goes first)."""
    delivery = get_delivery(session, club_id, delivery_id)
    refused = personal_data.refusal(_payload_removed(session, delivery.event_id))
    if refused is not None:
        raise errors.Conflict(refused)
    endpoint = session.get_one(Endpoint, delivery.endpoint_id)
    club = session.get_one(Club, club_id)
    if not club.webhooks_enabled:
        raise errors.InvalidInput("Webhooks & API are not enabled for this club.")
    if not endpoint.enabled:
        raise errors.InvalidInput("The endpoint is switched off: switch it on first.")
    if not delivering.retryable(delivery.event.kind):
        raise errors.InvalidInput("A Send test is not retried: send a new test instead.")
    if endpoint.ordered:
        _check_not_held(session, delivery)
    delivery.next_attempt_at = now
    delivery.next_attempt_asked = False
    delivery.next_trigger = Trigger.MANUAL
    delivery.updated_at = now
    session.flush()
    if endpoint.ordered:
        ordered_lines.enter(session, endpoint.id, [delivery.id], now)
        session.refresh(delivery)
    connection = session.connection()
    queue.on(connection).mark_due(connection, [delivery.endpoint_id], now)
    return delivery


def _check_not_held(session: Session, delivery: Delivery) -> None:
    """Refuse to bring forward a delivery held in its line (the endpoint's row is held
    first, as every change to its lines does)."""
    ordered_lines.lock_endpoints(session, [delivery.endpoint_id])
    ahead = ordered_lines.waiting_for(session, delivery.id)
    if ahead is not None:
        raise errors.Conflict(
            f"It waits for the delivery of sequence {ahead} of {delivery.ordering_key}, "
            "which goes first: this endpoint gets each resource's events in order. Retry "
            "that one to send it sooner."
        )


def _payload_removed(session: Session, event_id: str) -> str | None:
    """Why the event's payload was removed, if it was, read under a share lock held until
    the Retry commits: an erasure or an expiry waits for it (or skips the event), and one that
    committed first is seen."""
    query = select(Event.payload_removed).where(Event.id == event_id)
    return session.scalar(query.with_for_update(read=True))


def describe(delivery: Delivery, waits_for: int | None = None) -> dict[str, object]:
    """The delivery as the command line shows it; ``waits_for``: the sequence it waits for
    when it is held (``held``)."""
    return {
        "id": delivery.id,
        "event": delivery.event.kind,
        "eventId": delivery.event_id,
        "endpointId": delivery.endpoint_id,
        "status": delivery.status,
        "skippedReason": delivery.skipped_reason,
        "payloadRemoved": delivery.event.payload_removed,
        "attempt": delivery.attempt,
        "responseCode": delivery.response_code,
        "nextAttemptAt": timestamps.to_wire_or_none(delivery.next_attempt_at),
        "nextAttemptAsked": delivery.next_attempt_asked,
        "orderingKey": delivery.event.ordering_key,
        "sequence": delivery.event.sequence,
        "inOrder": delivery.ordering_key is not None,
        "waitsFor": waits_for,
        "missedSequence": delivery.missed_sequence,
        "createdAt": timestamps.to_wire(delivery.created_at),
    }


def describe_attempt(attempt: Attempt) -> dict[str, object]:
    return {
        "number": attempt.number,
        "trigger": attempt.trigger,
        "startedAt": timestamps.to_wire(attempt.started_at),
        "durationMs": attempt.duration_ms,
        "responseCode": attempt.response_code,
        "error": attempt.error,
        "excerpt": attempt.excerpt,
        "retryAfter": attempt.retry_after,
    }
