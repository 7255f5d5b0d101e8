"""The delivery queue (ADR 0008): each endpoint's deliveries wait behind a queue head that
says when the next one is due and which worker's lease holds the endpoint's lane.

Finding due work reads only the heads that are due and free, so it costs the same however
many deliveries wait for a later retry; a worker leases a lane, reads that endpoint's due
deliveries (writing none of them), and writes each delivery once, when it records the
attempt; then it gives the lane back, and the head says when the endpoint is next due.

One implementation per database (``postgres``, ``sqlite``) owns all of the queue's SQL and
its wake-up; ``of`` is the one place that asks which database is in use (``on``: for a
connection).
"""

from __future__ import annotations

from sqlalchemy import Connection

from clubwire.storage.queue.heads import START, Claimed, LeasedLane, Place, Queue, Row, Want
from clubwire.storage.queue.link import Link, Wake
from clubwire.storage.queue.postgres import PostgresQueue
from clubwire.storage.queue.sqlite import SqliteQueue

__all__ = [
    "START",
    "Claimed",
    "LeasedLane",
    "Link",
    "Place",
    "Queue",
    "Row",
    "Wake",
    "Want",
    "of",
    "on",
]

_QUEUES: dict[str, Queue] = {"postgresql": PostgresQueue(), "sqlite": SqliteQueue()}


def of(dialect_name: str) -> Queue:
    """The queue of the database whose SQLAlchemy dialect is ``dialect_name``."""
    return _QUEUES[dialect_name]


def on(connection: Connection) -> Queue:
    """The queue of the database ``connection`` is on."""
    return of(connection.dialect.name)
