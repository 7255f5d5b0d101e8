"""Replay: send an endpoint's finished deliveries of a time range again, each as Retry does
(a manual attempt, same delivery and event ids, a fresh signature), at most ``limit`` of
them, oldest first; the UI, the CLI and the internal API all call these two functions.

Choosing and bringing forward is one statement whose ``WHERE`` also says "not brought
forward yet" (``next_attempt_at IS NULL``), so a replay submitted twice at once sends each
delivery once: the second statement finds the first one's deliveries already due. The
window is read through ``ix_deliveries_endpoint_id_created_at_id``, in its order.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select, update
from sqlalchemy.orm import Session

from clubwire import errors
from clubwire.domain import event_catalog
from clubwire.domain.delivering import Trigger
from clubwire.domain.replay_window import Replay, Window
from clubwire.services import ordered_lines
from clubwire.storage import queue
from clubwire.storage.models import Club, Delivery, Endpoint, Event


def preview(session: Session, club_id: str, endpoint_id: str, window: Window, limit: int) -> Replay:
    """What replaying ``window`` would send now; nothing is written."""
    _open_endpoint(session, club_id, endpoint_id)
    matching = _count(session, endpoint_id, window)
    return Replay(min(matching, limit), matching, _withheld(session, endpoint_id, window))


def replay(
    session: Session, club_id: str, endpoint_id: str, window: Window, now: datetime, limit: int
) -> Replay:
    """Bring the next attempt of up to ``limit`` of the window's deliveries, oldest first,
    forward to ``now``, and tell the workers, in the caller's transaction."""
    ordered = _open_endpoint(session, club_id, endpoint_id, lock=True)
    matching = _count(session, endpoint_id, window)
    chosen = _chosen(endpoint_id, window).order_by(Delivery.created_at, Delivery.id).limit(limit)
    # The events are locked too, so that an erasure or an expiry of one (which locks it, or
    # skips it while locked) cannot empty it between this choice and the send.
    # Materialised: PostgreSQL would otherwise run a locking subquery again for each row,
    # and each run skips the rows already written, passing the limit. Nested, so that the
    # statement begins with UPDATE, which Python's sqlite3 opens a transaction for.
    locked = (
        chosen.with_for_update(of=(Delivery, Event), skip_locked=True)
        .cte("chosen", nesting=True)
        .prefix_with("MATERIALIZED")
    )
    brought = session.scalars(
        update(Delivery)
        .where(Delivery.id.in_(select(locked.c.id)), *_still(window))
        .values(
            next_attempt_at=now,
            next_attempt_asked=False,
            next_trigger=Trigger.MANUAL,
            updated_at=now,
        )
        .returning(Delivery.id)
        .execution_options(synchronize_session=False),
    ).all()
    count = len(brought)
    if count:
        if ordered:
            ordered_lines.enter(session, endpoint_id, brought, now)
        connection = session.connection()
        queue.on(connection).mark_due(connection, [endpoint_id], now)
    return Replay(count, max(matching, count), _withheld(session, endpoint_id, window))


def _open_endpoint(session: Session, club_id: str, endpoint_id: str, lock: bool = False) -> bool:
    """The club's endpoint, on and with the module on; ``lock``: held until the transaction
    ends, so that it cannot be switched off while its deliveries are brought forward (and
    its lines change one after another: ``ordered_lines``). Whether it is ordered."""
    columns = (Endpoint.enabled, Club.webhooks_enabled, Endpoint.ordered)
    query = select(*columns).join(Club, Club.id == Endpoint.club_id)
    query = query.where(Endpoint.club_id == club_id, Endpoint.id == endpoint_id)
    found = session.execute(query.with_for_update(of=Endpoint) if lock else query).first()
    if found is None:
        raise errors.NotFound(f"This club has no webhook endpoint {endpoint_id!r}.")
    endpoint_on, module_on, ordered = found
    if not module_on:
        raise errors.Conflict("Webhooks & API are off for this club: nothing can be replayed.")
    if not endpoint_on:
        raise errors.Conflict("The endpoint is switched off: switch it on to replay.")
    return bool(ordered)


def _count(session: Session, endpoint_id: str, window: Window) -> int:
    return _counted(session, _chosen(endpoint_id, window))


def _withheld(session: Session, endpoint_id: str, window: Window) -> int:
    """How many of the window's deliveries are not sent: their payload was removed."""
    return _counted(session, _chosen(endpoint_id, window, Event.payload_removed.is_not(None)))


def _counted(session: Session, query: Select[Any]) -> int:
    counted = query.with_only_columns(func.count(), maintain_column_froms=True)
    return session.scalar(counted) or 0


def _chosen(
    endpoint_id: str, window: Window, payload: ColumnElement[bool] | None = None
) -> Select[Any]:
    """The window's deliveries that a replay sends (a Send test's ping never is, nor one
    whose payload was erased or expired); ``payload``: those whose payload is so instead."""
    kind = Event.kind.in_(window.kinds) if window.kinds else Event.kind != event_catalog.PING
    return (
        select(Delivery.id)
        .join(Event, Event.id == Delivery.event_id)
        .where(
            Delivery.endpoint_id == endpoint_id,
            Delivery.created_at >= window.since,
            Delivery.created_at < window.until,
            kind,
            Event.payload_removed.is_(None) if payload is None else payload,
            *_still(window),
        )
    )


def _still(window: Window) -> tuple[ColumnElement[bool], ...]:
    """In a chosen status, and not brought forward since it finished (by Retry, or by a
    replay a moment ago, maybe held in its line since): checked again on each row the
    update writes."""
    return (
        Delivery.status.in_(window.statuses),
        Delivery.next_attempt_at.is_(None),
        ~ordered_lines.in_line(Delivery.id),
    )
