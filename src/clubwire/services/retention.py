"""Retention: delivery history older than the retention period is deleted, in small batches.

What goes, when older than the period (``CLUBWIRE_RETENTION_DAYS``):

- attempts, by when they started;
- finished deliveries (not pending, no attempt queued) of events created before then, with
  whatever attempts they still have;
- events created before then that no delivery refers to any more (their idempotency keys go
  with them);
- emails of the outbox queued before then and sent or given up.

Payloads of clubs that keep them for fewer days are emptied too (``services.personal_data.
expiry``), in batches of their own.

Failed sign-in counts with nothing left in them go too, whatever the period
(``services.staff.sign_ins``): guessing from many addresses leaves one row per address; and
flashes too old to be shown (``services.staff.flashes``), left by a browser that never loaded the
page after its action.

Each batch is a transaction of its own, so no lock is held for long (SQLite has a single
writer, the worker's among them). On PostgreSQL rows locked by another transaction are
skipped, so several workers pruning at once share the work instead of waiting on each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Delete, delete, exists, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Status
from clubwire.services import ordered_lines
from clubwire.services.personal_data import expiry
from clubwire.services.staff import flashes, sign_ins
from clubwire.storage import tables
from clubwire.storage.models import OutboxEmail

BATCH = 1000


@dataclass(frozen=True, slots=True)
class Pruned:
    attempts: int = 0
    deliveries: int = 0
    events: int = 0
    emails: int = 0
    sign_in_failures: int = 0
    flashes: int = 0
    payloads: int = 0  # events whose payload expired (emptied, not deleted)

    @property
    def total(self) -> int:
        old = self.attempts + self.deliveries + self.events + self.emails
        return old + self.sign_in_failures + self.flashes + self.payloads


def prune(
    sessions: sessionmaker[Session],
    now: datetime,
    retention: timedelta,
    batch: int = BATCH,
    keep_going: Callable[[], bool] = lambda: True,
) -> Pruned:
    """Delete what is older than ``retention`` at ``now``, then empty the payloads that
    expired, ``batch`` rows per transaction, until nothing is left (or ``keep_going()`` turns
    false between batches)."""
    cutoff = now - retention
    counts = [
        _drain(sessions, statement(cutoff, batch), keep_going)
        for statement in (_old_attempts, _finished_deliveries, _lone_events, _finished_emails)
    ]
    for spent in (sign_ins.stale, flashes.stale):
        counts.append(_drain(sessions, spent(now, batch), keep_going))
    counts.append(expiry.expire(sessions, now, retention, batch, keep_going))
    return Pruned(*counts)


def _drain(
    sessions: sessionmaker[Session], statement: Delete, keep_going: Callable[[], bool]
) -> int:
    total = 0
    while keep_going():
        with sessions.begin() as session:
            deleted: int = session.connection().execute(statement).rowcount
        total += deleted
        if not deleted:
            break
    return total


def _old_attempts(cutoff: datetime, batch: int) -> Delete:
    a = tables.attempts.c
    chosen = select(a.id).where(a.started_at < cutoff).limit(batch)
    return delete(tables.attempts).where(a.id.in_(chosen.with_for_update(skip_locked=True)))


def _finished_deliveries(cutoff: datetime, batch: int) -> Delete:
    d, e = tables.deliveries.c, tables.events.c
    chosen = (
        select(d.id)
        .join(tables.events, e.id == d.event_id)
        .where(e.created_at < cutoff, d.status != Status.PENDING, d.next_attempt_at.is_(None))
        .where(~ordered_lines.in_line(d.id))  # a Replay waiting in its line is not finished
        .limit(batch)
        .with_for_update(skip_locked=True, of=tables.deliveries)
    )
    return delete(tables.deliveries).where(d.id.in_(chosen))


def _lone_events(cutoff: datetime, batch: int) -> Delete:
    e = tables.events.c
    referred = exists().where(tables.deliveries.c.event_id == e.id)
    chosen = select(e.id).where(e.created_at < cutoff, ~referred).limit(batch)
    return delete(tables.events).where(e.id.in_(chosen.with_for_update(skip_locked=True)))


def _finished_emails(cutoff: datetime, batch: int) -> Delete:
    o = OutboxEmail
    done = select(o.id).where(o.created_at < cutoff, o.next_attempt_at.is_(None)).limit(batch)
    return delete(o).where(o.id.in_(done.with_for_update(skip_locked=True)))
