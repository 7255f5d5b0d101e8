"""The tables as SQLAlchemy Core sees them, for the hot statements that run on the tables
themselves, not through the ORM's machinery (DESIGN §8)."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table

from clubwire.storage.models import (
    ApiChanges,
    Attempt,
    Club,
    Delivery,
    Endpoint,
    Event,
    EventPerson,
    OrderedLine,
    OrderingCounter,
    QueueEntry,
    QueueHead,
)

api_changes = cast(Table, ApiChanges.__table__)
attempts = cast(Table, Attempt.__table__)
clubs = cast(Table, Club.__table__)
deliveries = cast(Table, Delivery.__table__)
endpoints = cast(Table, Endpoint.__table__)
events = cast(Table, Event.__table__)
event_people = cast(Table, EventPerson.__table__)
ordered_lines = cast(Table, OrderedLine.__table__)
ordering_counters = cast(Table, OrderingCounter.__table__)
queue_entries = cast(Table, QueueEntry.__table__)
queue_heads = cast(Table, QueueHead.__table__)
