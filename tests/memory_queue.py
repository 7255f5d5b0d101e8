"""The delivery queue's protocol in memory, for unit tests of the lane policy: the same
operations as ``storage.queue`` (the ``connection`` argument unused), on plain dicts."""

# ruff: noqa: ARG002 (the protocol's arguments, which memory does not need)

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Result, Status, Trigger
from clubwire.storage.queue import LeasedLane, Link, Queue, Row, Want


@dataclass
class Waiting:
    endpoint_id: str
    due: datetime | None
    attempt: int = 0
    status: Status = Status.PENDING


@dataclass
class Head:
    next_due_at: datetime | None = None
    lease_until: datetime | None = None
    token: str | None = None


class MemoryQueue(Queue):
    def __init__(self, rates: Mapping[str, int] | None = None) -> None:
        self.deliveries: dict[str, Waiting] = {}
        self.heads: dict[str, Head] = {}
        self.rates = dict(rates or {})
        self.recorded: list[Result] = []

    def add(self, endpoint_id: str, delivery_id: str, due: datetime) -> None:
        """A delivery due at ``due`` (publishing, as far as the queue sees it)."""
        self.deliveries[delivery_id] = Waiting(endpoint_id, due)
        self.mark_due(None, [endpoint_id], due)  # type: ignore[arg-type]

    def mark_due(
        self, connection: Connection, endpoint_ids: Collection[str], now: datetime
    ) -> None:
        for endpoint_id in endpoint_ids:
            head = self.heads.setdefault(endpoint_id, Head())
            if head.next_due_at is None or head.next_due_at > now:
                head.next_due_at = now

    def wake(self, connection: Connection, endpoint_ids: Collection[str]) -> None:
        """Nothing listens in memory."""

    def changed(self, connection: Connection, endpoint_ids: Collection[str]) -> None:
        """Nothing listens in memory."""

    def link(self, sessions: sessionmaker[Session]) -> Link:
        """The policy's tests run its claim rounds themselves, with no worker."""
        raise AssertionError("no worker runs on the queue in memory")

    def take(
        self,
        connection: Connection,
        now: datetime,
        until: datetime,
        token: str,
        lanes: int,
        named: Collection[str] | None = None,
    ) -> list[str]:
        free = [
            (head.next_due_at, endpoint_id)
            for endpoint_id, head in self.heads.items()
            if head.next_due_at is not None
            and head.next_due_at <= now
            and (head.lease_until is None or head.lease_until < now)
            and (named is None or endpoint_id in named)
        ]
        taken = [endpoint_id for _, endpoint_id in sorted(free)[:lanes]]
        for endpoint_id in taken:
            self.heads[endpoint_id].lease_until = until
            self.heads[endpoint_id].token = token
        return taken

    def renew(
        self, connection: Connection, endpoint_ids: Collection[str], token: str, until: datetime
    ) -> list[str]:
        kept = [e for e in endpoint_ids if self.heads[e].token == token]
        for endpoint_id in kept:
            self.heads[endpoint_id].lease_until = until
        return kept

    def lanes(self, connection: Connection, endpoint_ids: Collection[str]) -> list[LeasedLane]:
        return [
            LeasedLane(e, "club", f"https://{e}.example/hooks", "sealed", True, self.rates.get(e))
            for e in endpoint_ids
        ]

    def rows(self, connection: Connection, now: datetime, wants: Mapping[str, Want]) -> list[Row]:
        rows: list[Row] = []
        for endpoint_id, want in wants.items():
            due = sorted(
                (waiting.due, delivery_id)
                for delivery_id, waiting in self.deliveries.items()
                if waiting.endpoint_id == endpoint_id
                and waiting.due is not None
                and waiting.due <= now
                and (waiting.due, delivery_id) > want.after
                and delivery_id not in want.held
            )
            for due_at, delivery_id in due[: want.count]:
                waiting = self.deliveries[delivery_id]
                rows.append(
                    (
                        delivery_id,
                        endpoint_id,
                        "registration.created",
                        b"{}",
                        str(waiting.status),
                        waiting.attempt,
                        str(Trigger.SCHEDULED),
                        due_at,
                        None,
                        None,
                        None,
                        None,
                    )
                )
        return rows

    def record(self, connection: Connection, results: Sequence[Result], now: datetime) -> set[str]:
        moved = set()
        for result in results:
            waiting = self.deliveries[result.job.delivery_id]
            if waiting.attempt == result.job.attempts_made:
                waiting.attempt += 1
                waiting.status = result.verdict.status
                waiting.due = result.verdict.next_attempt_at
                moved.add(result.job.delivery_id)
            self.recorded.append(result)
        return moved

    def give_back(
        self, connection: Connection, endpoint_ids: Collection[str], token: str, now: datetime
    ) -> None:
        for endpoint_id in endpoint_ids:
            head = self.heads[endpoint_id]
            if head.token == token:
                head.lease_until = head.token = None
                earliest = self._earliest(endpoint_id)
                head.next_due_at = now if earliest is not None and earliest < now else earliest

    def refresh(self, connection: Connection, endpoint_ids: Collection[str]) -> None:
        for endpoint_id in endpoint_ids:
            self.heads[endpoint_id].next_due_at = self._earliest(endpoint_id)

    def next_due(self, connection: Connection, now: datetime) -> datetime | None:
        times = [
            head.lease_until if head.lease_until and head.lease_until > now else head.next_due_at
            for head in self.heads.values()
            if head.next_due_at is not None
        ]
        return min((t for t in times if t is not None), default=None)

    def _earliest(self, endpoint_id: str) -> datetime | None:
        due = [
            waiting.due
            for waiting in self.deliveries.values()
            if waiting.endpoint_id == endpoint_id and waiting.due is not None
        ]
        return min(due, default=None)
