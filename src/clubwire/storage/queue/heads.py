"""What both databases' queues share: the queue heads' statements, written once in Core."""

from __future__ import annotations

import abc
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    ScalarSelect,
    String,
    TextClause,
    bindparam,
    case,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import trace_context
from clubwire.domain.delivering import Job, Result, Status, Trigger
from clubwire.storage import tables
from clubwire.storage.queue import rows
from clubwire.storage.queue.link import Link
from clubwire.storage.types import UTCDateTime

_h = tables.queue_heads.c
_e = tables.endpoints.c
_NOW = rows.NOW
_UNTIL = bindparam("until", type_=UTCDateTime())
_TOKEN = bindparam("token", type_=String())
_ENDPOINTS = bindparam("endpoints", type_=String(), expanding=True)


@dataclass(frozen=True, slots=True)
class LeasedLane:
    """A leased endpoint lane: what every attempt to the endpoint needs, read once per claim
    round (a new URL, secret or header is used from the next round on), and whether it may be
    sent to at all (the endpoint on, and its club's module)."""

    endpoint_id: str
    club_id: str
    url: str
    secret_sealed: str
    open: bool
    max_rate: int | None  # deliveries a second, None: no limit
    headers_sealed: str | None = None  # its headers of its own, sealed; None: none

    def job(self, row: Row, until: datetime, token: str) -> Job:
        """One of the lane's due deliveries, as read (``Row``), claimed under ``token``."""
        delivery_id, _, kind, body, status, attempts, trigger, due, key, missed, parent, state = row
        return Job(
            delivery_id,
            self.club_id,
            self.endpoint_id,
            kind,
            self.url,
            self.secret_sealed,
            body,
            _STATUSES[status],
            attempts,
            _TRIGGERS[trigger],
            until,
            token,
            self.headers_sealed,
            key,
            missed,
            due,
            trace_context.of(parent, state),
        )


# Stored values as their enums, by a dict: ``Status(value)`` goes through the enum's metaclass,
# 0.4 µs, twice for every job claimed.
_STATUSES = {status.value: status for status in Status}
_TRIGGERS = {trigger.value: trigger for trigger in Trigger}

# A due delivery as a lane reads it: id, endpoint id, kind, body, status, attempts, trigger,
# when it is due, its ordering key if it goes in order, the sequence it missed, and its
# event's trace context (traceparent, tracestate).
Row = tuple[
    str, str, str, bytes, str, int, str, datetime, str | None, int | None, str | None, str | None
]

# A place in an endpoint's queue, which orders its due deliveries by due time, then id.
Place = tuple[datetime, str]
START: Place = (datetime.min.replace(tzinfo=UTC), "")  # before every delivery


@dataclass(frozen=True, slots=True)
class Want:
    """What one lane's claim asks for: up to ``count`` of its endpoint's due deliveries after
    ``after`` (the place the lane's claims have reached), but for those in ``held`` (claimed
    already, not recorded yet, and maybe after ``after``), as jobs under the lane's lease
    until ``until``. A lane's claims go on from where the last one ended, so a claim costs
    the same however many jobs the lane holds (ADR 0008)."""

    lane: LeasedLane
    count: int
    until: datetime
    after: Place = START
    held: Collection[str] = ()


class Claimed(NamedTuple):
    """What a claim read: the jobs, and where each lane's claims have now reached."""

    jobs: list[Job]
    reached: dict[str, Place]  # by endpoint: the place of the last job claimed for its lane


@dataclass(frozen=True, slots=True)
class Pending:
    """Where a database keeps the queue's order: each delivery with an attempt due, by
    endpoint and due time, indexed on both (only those: finished deliveries stay out)."""

    endpoint_id: ColumnElement[str]
    due_at: ColumnElement[datetime]

    def earliest(self) -> ScalarSelect[Any]:
        """When the head's endpoint has its next delivery due (one probe of the index)."""
        return (
            select(self.due_at)
            .where(self.endpoint_id == _h.endpoint_id, self.due_at.is_not(None))
            .order_by(self.due_at)
            .limit(1)
            .scalar_subquery()
        )


def _taking(named: bool) -> Any:
    """Lease up to ``lanes`` due, free heads (those ``named`` only, if so), the longest
    waiting first; PostgreSQL skips heads another transaction holds."""
    free = or_(_h.lease_until.is_(None), _h.lease_until < _NOW)
    chosen = select(_h.endpoint_id).where(_h.next_due_at <= _NOW, free)
    if named:
        chosen = chosen.where(_h.endpoint_id.in_(_ENDPOINTS))
    chosen = chosen.order_by(_h.next_due_at).limit(bindparam("lanes"))
    return (
        update(tables.queue_heads)
        .where(_h.endpoint_id.in_(chosen.with_for_update(skip_locked=True).scalar_subquery()))
        .values(lease_until=_UNTIL, lease_token=_TOKEN)
        .returning(_h.endpoint_id, _h.next_due_at)
    )


_TAKE_ANY = _taking(named=False)
_TAKE_NAMED = _taking(named=True)


def _locking(*where: ColumnElement[bool]) -> Any:
    """The heads of ``_ENDPOINTS`` that match ``where``, locked in the endpoints' order.
    Every statement that may wait for heads takes them in that one order, as a publish's
    upsert does (``mark_due``), so that a worker and a publish never each hold a head the
    other waits for (issue 31: renewals deadlocked with publishes). Taking lanes never
    waits (``SKIP LOCKED``)."""
    chosen = select(_h.endpoint_id).where(_h.endpoint_id.in_(_ENDPOINTS), *where)
    return chosen.order_by(_h.endpoint_id).with_for_update()


_HOLDING = _locking(_h.lease_token == _TOKEN)
_RENEW = (
    update(tables.queue_heads)
    .where(_h.endpoint_id.in_(_HOLDING.scalar_subquery()))
    .values(lease_until=_UNTIL)
    .returning(_h.endpoint_id)
)
_LANES = (
    select(
        _e.id,
        _e.club_id,
        _e.url,
        _e.secret_sealed,
        _e.enabled & tables.clubs.c.webhooks_enabled,
        _e.max_rate,
        _e.headers_sealed,
    )
    .join(tables.clubs, tables.clubs.c.id == _e.club_id)
    .where(_e.id.in_(_ENDPOINTS))
)
_HEADS = _locking()
# Of every lane with deliveries waiting: when it is due, or, leased, when its lease runs out.
_NEXT_DUE = select(
    func.min(case((_h.lease_until > _NOW, _h.lease_until), else_=_h.next_due_at))
).where(_h.next_due_at.is_not(None))


class Queue(abc.ABC):
    """The queue's operations; each runs in the caller's transaction on ``connection``. The
    subclasses give what their database does its own way, and where it keeps the queue's
    order (``pending``)."""

    _insert_attempts: TextClause  # attempts from the batch's JSON document ``:results``
    _move: TextClause  # deliveries moved by the same document; their ids
    _release: TextClause  # the first of each line of the JSON document ``:lines`` made due

    def __init__(self, pending: Pending) -> None:
        earliest = pending.earliest()
        heads = update(tables.queue_heads).where(_h.endpoint_id.in_(_ENDPOINTS))
        # A lane given back with deliveries still due goes behind the lanes that waited
        # meanwhile; those still due come back, the others as NULL.
        self._give_back = heads.values(
            next_due_at=case((earliest < _NOW, _NOW), else_=earliest),
            lease_until=None,
            lease_token=None,
        ).returning(case((_h.next_due_at <= _NOW, _h.endpoint_id)))
        self._refresh = heads.values(next_due_at=earliest)
        self._backlog = select(func.count(), func.min(pending.due_at)).where(pending.due_at <= _NOW)

    @abc.abstractmethod
    def mark_due(
        self, connection: Connection, endpoint_ids: Collection[str], now: datetime
    ) -> None:
        """The endpoints have a delivery due at ``now`` (a publish, Retry, a resend): their
        heads say so, and listening workers are told when the transaction commits. The head
        is written even when already due, so that a worker giving the lane back at the same
        moment waits for this transaction and then sees its deliveries. The heads are
        written in the endpoints' order, so that concurrent publishes lock them in one order."""

    @abc.abstractmethod
    def wake(self, connection: Connection, endpoint_ids: Collection[str]) -> None:
        """Tell listening workers, once the transaction commits, that the endpoints may have
        deliveries due."""

    @abc.abstractmethod
    def changed(self, connection: Connection, endpoint_ids: Collection[str]) -> None:
        """Tell listening workers, once the transaction commits, that the endpoints changed
        (a worker holding one reads it again). Apart from ``wake``: a worker reads a lane's
        endpoint again only when it changed, not at every publish (reading it again renewed
        the lease, which waited for the publishes holding its head: issue 31)."""

    def take(
        self,
        connection: Connection,
        now: datetime,
        until: datetime,
        token: str,
        lanes: int,
        named: Collection[str] | None = None,
    ) -> list[str]:
        """Lease up to ``lanes`` lanes with deliveries due (of the ``named`` endpoints only,
        if given) under ``token`` until ``until``; the endpoints leased, the longest waiting
        first."""
        if named is not None and not named:
            return []
        values: dict[str, object] = {"now": now, "until": until, "token": token, "lanes": lanes}
        if named is not None:
            values["endpoints"] = list(named)
        taken = connection.execute(_TAKE_ANY if named is None else _TAKE_NAMED, values).all()
        # RETURNING keeps no order: the longest waiting first, as they were chosen.
        return [endpoint_id for endpoint_id, _ in sorted(taken, key=lambda row: (row[1], row[0]))]

    def lock(self, connection: Connection, endpoint_ids: Collection[str]) -> list[str]:
        """Lock the heads of these endpoints for the rest of the transaction, in the
        endpoints' order, waiting for the transactions that hold them (a publish holds its
        heads until it commits); the endpoints that have heads."""
        if not endpoint_ids:
            return []
        return list(connection.execute(_HEADS, {"endpoints": list(endpoint_ids)}).scalars())

    def renew(
        self, connection: Connection, endpoint_ids: Collection[str], token: str, until: datetime
    ) -> list[str]:
        """Extend the leases still held under ``token``; the endpoints still held."""
        if not endpoint_ids:
            return []
        values = {"endpoints": list(endpoint_ids), "token": token, "until": until}
        return list(connection.execute(_RENEW, values).scalars())

    def lanes(self, connection: Connection, endpoint_ids: Collection[str]) -> list[LeasedLane]:
        """What attempts to these endpoints need, read once for each lane."""
        if not endpoint_ids:
            return []
        rows = connection.execute(_LANES, {"endpoints": list(endpoint_ids)})
        return [
            LeasedLane(endpoint_id, club_id, url, sealed, bool(open_), rate, headers)
            for endpoint_id, club_id, url, sealed, open_, rate, headers in rows
        ]

    def jobs(
        self, connection: Connection, now: datetime, wants: Mapping[str, Want], token: str
    ) -> Claimed:
        """Each wanted lane's due deliveries as its ``Want`` says, oldest first, as jobs under
        the lane's lease (``token``), and where each lane's claims have now reached: nothing
        is written."""
        jobs = []
        reached = {}
        for row in self.rows(connection, now, wants):
            want = wants[row[1]]
            jobs.append(want.lane.job(row, want.until, token))
            reached[row[1]] = (row[7], row[0])
        return Claimed(jobs, reached)

    @abc.abstractmethod
    def rows(self, connection: Connection, now: datetime, wants: Mapping[str, Want]) -> list[Row]:
        """Each wanted endpoint's due deliveries as its ``Want`` says, in the queue's order
        (by endpoint, due time, id); nothing is written."""

    def record(self, connection: Connection, results: Sequence[Result], now: datetime) -> set[str]:
        """Move each delivery as its verdict says, unless another attempt of it was
        recorded first (its attempts or status no longer what the job read) or it began to
        go in order since (``rows.STILL_AS_READ``), then store the attempts
        (``rows.ANSWER_KEPT``); attempts of deliveries deleted meanwhile are dropped. Two
        statements, both reading the batch as one JSON document (``rows.batch``). The ids of
        the deliveries moved."""
        if not results:
            return set()
        batch = rows.batch(results, connection.dialect)
        values = {"results": batch, "ids": rows.ids(results), "now": now}
        moved = set(connection.execute(self._move, values).scalars())
        connection.execute(self._insert_attempts, values)
        return moved

    def release(
        self, connection: Connection, lines: Mapping[tuple[str, str], int | None], now: datetime
    ) -> list[str]:
        """Make the first delivery of each of these lines (endpoint, ordering key) due now,
        if it was held, telling it the sequence the line missed (its value, if not None);
        one statement whatever their number. The endpoints of those released."""
        if not lines:
            return []
        document = rows.document(
            [
                {"endpoint_id": endpoint_id, "ordering_key": key, "missed": missed}
                for (endpoint_id, key), missed in sorted(lines.items())
            ]
        )
        released = connection.execute(self._release, {"lines": document, "now": now}).scalars()
        return sorted(set(released))

    def give_back(
        self, connection: Connection, endpoint_ids: Collection[str], token: str, now: datetime
    ) -> None:
        """End the leases still held under ``token``; each head then says when its endpoint
        is next due: ``now`` at the earliest, so that an endpoint with deliveries still due
        queues behind those that waited while it was served (turns, not the oldest delivery
        first, which would let one big backlog hold a worker). Their heads are locked first,
        so a publish committing meanwhile is seen. Listening workers are told of the lanes
        still due, so that an idle one may take its turn."""
        if not endpoint_ids:
            return
        values = {"endpoints": list(endpoint_ids), "token": token}
        held = list(connection.execute(_HOLDING, values).scalars())
        if held:
            due = connection.execute(self._give_back, {"endpoints": held, "now": now}).scalars()
            self.wake(connection, [endpoint_id for endpoint_id in due if endpoint_id])

    def refresh(self, connection: Connection, endpoint_ids: Collection[str]) -> None:
        """Recompute the heads after their deliveries were skipped or removed. They are
        locked first, in order, and recomputed by the next statement, which sees what a
        publish that held one committed meanwhile (as ``give_back`` does)."""
        locked = self.lock(connection, endpoint_ids)
        if locked:
            connection.execute(self._refresh, {"endpoints": locked})

    @abc.abstractmethod
    def link(self, sessions: sessionmaker[Session]) -> Link:
        """The worker's way to the queue, on the database of ``sessions``."""

    def backlog(self, connection: Connection, now: datetime) -> tuple[int, datetime | None]:
        """How many deliveries of all clubs are due (or in flight), and the oldest due time
        (one read of the queue's order)."""
        count, oldest = connection.execute(self._backlog, {"now": now}).one()
        return count, oldest

    def next_due(self, connection: Connection, now: datetime) -> datetime | None:
        """When a worker should next look: the earliest head due, or a leased head's lease
        running out (one read of the heads with deliveries waiting)."""
        return connection.execute(_NEXT_DUE, {"now": now}).scalar()


def upsert_heads(statement: Any) -> Any:
    """The database's ``INSERT`` of heads (``endpoint_id``, ``next_due_at``) made to insert
    them as due, or bring existing ones forward (never back)."""
    new = statement.excluded.next_due_at
    later = or_(_h.next_due_at.is_(None), _h.next_due_at > new)
    return statement.on_conflict_do_update(
        index_elements=[_h.endpoint_id],
        set_={"next_due_at": case((later, new), else_=_h.next_due_at)},
    )
