"""Erasing a member (issue 34, ADR 0016): their name and email, wherever clubwire keeps them.

An erasure names a member by email, member id, or both (``personal_data.Wanted``). It finds
the member's events by the digests kept at publish (``event_people``), never by reading the
club's history, and works through them in batches, each a transaction of its own:

- claim the batch by deleting its digest rows (``DELETE … RETURNING``): two erasures of the
  same member at once share the events, each erased once, and an event published meanwhile
  is found by the next batch;
- replace the member's fields in each event's body by the marker (``payload_removed`` =
  ``erased``); forget its idempotency key if the key quotes them;
- skip the deliveries not yet delivered (reason ``erased``) and withdraw a queued Retry;
- scrub every spelling of the member's name and email from their attempts' recorded answers,
  errors and ``Retry-After``.

Then the club's email outbox and the flashes are scrubbed, and a record of the erasure is
kept without any personal data: when, by whom, by what it matched, and counts per table. A
dry run walks the same events and counts what would change, writing nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import bindparam, case, delete, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire import ids, logs
from clubwire.domain import personal_data, timestamps
from clubwire.domain.delivering import SkipReason, Status, Trigger
from clubwire.domain.personal_data import Removed, Wanted
from clubwire.services import clubs, ordered_lines
from clubwire.storage import database, queue, tables
from clubwire.storage.models import Erasure, Flash, OutboxEmail

BATCH = 500
# After each batch, a pause of this many times what the batch took: an erasure leaves the
# processor and the database to every club's deliveries three quarters of its time. On two
# busy cores, another club's deliveries/s during an erasure went from 0.84-0.87 of their rate
# beside it (no pause) to 0.93-0.96 (bench/erasure.py; ADR 0016).
YIELD = 3.0


class By:
    """Who asked for an erasure."""

    PLATFORM = "platform"  # the host platform, through the internal API
    OPERATOR = "operator"  # an operator, with ``clubwire member erase``


@dataclass(frozen=True, slots=True)
class Counts:
    """How many rows of each table an erasure changed (or, a dry run, would change)."""

    events: int = 0  # bodies with the member's fields replaced
    deliveries: int = 0  # not yet delivered: skipped as erased (or a queued Retry withdrawn)
    attempts: int = 0  # recorded answers, errors or Retry-After that quoted the member
    emails: int = 0  # emails of the outbox that quoted them
    flashes: int = 0  # one-time messages of the settings area that quoted them

    def __add__(self, other: Counts) -> Counts:
        mine, theirs = asdict(self), asdict(other)
        return Counts(**{name: mine[name] + theirs[name] for name in mine})


@dataclass(frozen=True, slots=True)
class Done:
    """An erasure as it is recorded and told: no personal data in it."""

    id: str | None  # None for a dry run, which is not recorded
    slug: str
    requested_by: str
    matched_by: str
    started_at: datetime
    finished_at: datetime
    dry_run: bool
    counts: Counts

    def describe(self) -> dict[str, object]:
        return {
            "id": self.id,
            "club": self.slug,
            "requestedBy": self.requested_by,
            "matchedBy": self.matched_by.split(),
            "startedAt": timestamps.to_wire(self.started_at),
            "finishedAt": timestamps.to_wire(self.finished_at),
            "dryRun": self.dry_run,
            "counts": asdict(self.counts),
        }


@dataclass(slots=True)
class _Batch:
    """What one batch did, and the values it removed (to scrub from texts that quote them)."""

    counts: Counts = Counts()
    values: set[str] = field(default_factory=set)


def erase(
    sessions: sessionmaker[Session],
    slug: str,
    wanted: Wanted,
    clock: Callable[[], datetime],
    requested_by: str,
    *,
    dry_run: bool = False,
    batch: int = BATCH,
) -> Done:
    """Erase (or, ``dry_run``, count) the personal data of the member ``wanted`` names in the
    club ``slug``: NotFound for an unknown club. Runs to the end; run again, it finds nothing
    left (or what was published meanwhile). Deliveries it skips are marked at ``clock()``'s
    time when it started."""
    started = clock()
    with sessions.begin() as session:
        club_id = clubs.get_club(session, slug).id
    walk = _count_all if dry_run else _erase_all
    done = walk(sessions, club_id, wanted, started, batch)
    spelled = _pattern(done.values | _given(wanted))
    texts = database.transact(sessions, _scrub_texts, club_id, spelled, not dry_run)
    result = Done(
        None if dry_run else ids.new_id("era"),
        slug,
        requested_by,
        wanted.matched_by,
        started,
        clock(),
        dry_run,
        done.counts + texts,
    )
    if not dry_run:
        database.transact(sessions, _record, club_id, result)
    logs.event(
        "erased", {"erasure": result.id, "club": slug, "dry_run": dry_run, **asdict(result.counts)}
    )
    return result


def _given(wanted: Wanted) -> set[str]:
    return {wanted.email} if wanted.email is not None else set()


def _erase_all(
    sessions: sessionmaker[Session], club_id: str, wanted: Wanted, now: datetime, batch: int
) -> _Batch:
    total = _Batch()
    digests = wanted.digests(club_id)
    while True:
        started = time.monotonic()
        done = database.transact(sessions, _erase_batch, club_id, digests, wanted, now, batch)
        if done is None:
            return total
        total.counts += done.counts
        total.values |= done.values
        time.sleep((time.monotonic() - started) * YIELD)


def _count_all(
    sessions: sessionmaker[Session], club_id: str, wanted: Wanted, now: datetime, batch: int
) -> _Batch:
    total = _Batch()
    digests = wanted.digests(club_id)
    after = ""
    with sessions.begin() as session:
        while chosen := _chosen(session, club_id, digests, batch, after):
            done = _erase_events(session, club_id, chosen, wanted, now, write=False)
            total.counts += done.counts
            total.values |= done.values
            after = chosen[-1]
    return total


def _chosen(
    session: Session, club_id: str, digests: Sequence[str], batch: int, after: str = ""
) -> list[str]:
    """Up to ``batch`` of the member's events, by their digests (``ix_event_people_…``)."""
    p = tables.event_people.c
    query = (
        select(p.event_id)
        .where(p.club_id == club_id, p.digest.in_(digests), p.event_id > after)
        .group_by(p.event_id)
        .order_by(p.event_id)
        .limit(batch)
    )
    return list(session.scalars(query))


def _erase_batch(
    session: Session,
    club_id: str,
    digests: Sequence[str],
    wanted: Wanted,
    now: datetime,
    batch: int,
) -> _Batch | None:
    """One batch, claimed by deleting its digest rows; None when no event is left."""
    chosen = _chosen(session, club_id, digests, batch)
    if not chosen:
        return None
    p = tables.event_people.c
    claimed = session.scalars(
        delete(tables.event_people)
        .where(p.event_id.in_(chosen), p.digest.in_(digests))
        .returning(p.event_id)
    ).all()
    return _erase_events(session, club_id, sorted(set(claimed)), wanted, now, write=True)


def _erase_events(
    session: Session,
    club_id: str,
    event_ids: Sequence[str],
    wanted: Wanted,
    now: datetime,
    write: bool,
) -> _Batch:
    """Erase ``wanted`` from these events and what hangs on them (``write``), or count it."""
    e = tables.events.c
    query = select(e.id, e.kind, e.body, e.idempotency_key).where(e.id.in_(event_ids))
    rows = session.execute(query.order_by(e.id).with_for_update() if write else query).all()
    changed: list[dict[str, Any]] = []
    done = _Batch()
    forgotten: set[str] = set()
    for event_id, kind, body, key in rows:
        erased = personal_data.erase(club_id, kind, body, wanted)
        if erased is None:
            continue
        done.values |= erased.values
        forgotten |= erased.digests
        changed.append({"e_id": event_id, "e_body": erased.body, "e_key": key})
    if not changed:
        return done
    erased_ids = [row["e_id"] for row in changed]
    spelled = _pattern(done.values | _given(wanted))
    for row in changed:  # a key that quotes the member is forgotten (a repeat makes a new event)
        if personal_data.holds(row["e_key"], spelled):
            row["e_key"] = None
    deliveries = _withdraw(session, erased_ids, now, write)
    attempts = _scrub_attempts(session, erased_ids, spelled, write)
    if write:
        session.connection().execute(_ERASE_BODY, changed)
        p = tables.event_people.c
        session.execute(
            delete(tables.event_people).where(
                p.event_id.in_(erased_ids), p.digest.in_(sorted(forgotten))
            )
        )
    done.counts = Counts(events=len(changed), deliveries=deliveries, attempts=attempts)
    return done


def _pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    return personal_data.pattern(personal_data.spellings(values))


_ERASE_BODY = (
    update(tables.events)
    .where(tables.events.c.id == bindparam("e_id"))
    .values(
        body=bindparam("e_body"),
        payload_removed=Removed.ERASED.value,
        idempotency_key=bindparam("e_key"),
    )
)


def _withdraw(session: Session, event_ids: Collection[str], now: datetime, write: bool) -> int:
    """The deliveries of these events with an attempt still to come (held in a line too): a
    pending one is skipped (reason ``erased``), a queued Retry of a finished one withdrawn.
    Those in order leave their lines, and the next of each goes, told the sequence its
    receiver missed."""
    d = tables.deliveries.c
    waiting = (
        d.event_id.in_(event_ids),
        or_(d.next_attempt_at.is_not(None), ordered_lines.in_line(d.id)),
    )
    if not write:
        return session.scalar(select(func.count()).where(*waiting)) or 0
    in_order = select(d.endpoint_id).where(*waiting, d.ordering_key.is_not(None)).distinct()
    ordered_lines.lock_endpoints(session, session.scalars(in_order).all())
    pending = d.status == Status.PENDING
    withdrawn = session.execute(
        update(tables.deliveries)
        .where(*waiting)
        .values(
            status=case((pending, Status.SKIPPED.value), else_=d.status),
            skipped_reason=case((pending, SkipReason.ERASED.value), else_=d.skipped_reason),
            next_attempt_at=None,
            next_attempt_asked=False,
            next_trigger=Trigger.SCHEDULED.value,
            updated_at=now,
        )
        .returning(d.id, d.endpoint_id, d.status)
    ).all()
    if withdrawn:
        ids = {delivery_id for delivery_id, _, _ in withdrawn}
        missed = {delivery_id for delivery_id, _, status in withdrawn if status == Status.SKIPPED}
        released = ordered_lines.finished(session, ids, missed, now)
        connection = session.connection()
        deliveries = queue.on(connection)
        deliveries.refresh(connection, {endpoint_id for _, endpoint_id, _ in withdrawn})
        deliveries.mark_due(connection, released, now)
    return len(withdrawn)


def _scrub_attempts(
    session: Session, event_ids: Collection[str], spelled: re.Pattern[str] | None, write: bool
) -> int:
    """Scrub the attempts of these events' deliveries; how many quoted the member."""
    a, d = tables.attempts.c, tables.deliveries.c
    found = session.execute(
        select(a.id, a.error, a.excerpt, a.retry_after)
        .join(tables.deliveries, d.id == a.delivery_id)
        .where(d.event_id.in_(event_ids))
    ).all()
    scrubbed = [
        {
            "a_id": attempt_id,
            "a_error": personal_data.scrub(error, spelled),
            "a_excerpt": personal_data.scrub(excerpt, spelled),
            "a_retry_after": personal_data.scrub(retry_after, spelled),
        }
        for attempt_id, error, excerpt, retry_after in found
        if any(personal_data.holds(text, spelled) for text in (error, excerpt, retry_after))
    ]
    if write and scrubbed:
        session.connection().execute(_SCRUB_ATTEMPT, scrubbed)
    return len(scrubbed)


_SCRUB_ATTEMPT = (
    update(tables.attempts)
    .where(tables.attempts.c.id == bindparam("a_id"))
    .values(
        error=bindparam("a_error"),
        excerpt=bindparam("a_excerpt"),
        retry_after=bindparam("a_retry_after"),
    )
)


def _scrub_texts(
    session: Session, club_id: str, spelled: re.Pattern[str] | None, write: bool
) -> Counts:
    """Scrub the club's emails of the outbox, and the flashes (a few minutes' worth, of all
    clubs: they name no club), of the member's name and email."""
    if spelled is None:
        return Counts()
    emails = session.scalars(select(OutboxEmail).where(OutboxEmail.club_id == club_id)).all()
    quoting_emails = [
        email
        for email in emails
        if any(personal_data.holds(text, spelled) for text in _texts_of(email))
    ]
    flashes = session.scalars(select(Flash)).all()
    quoting_flashes = [flash for flash in flashes if personal_data.holds(flash.words, spelled)]
    if write:
        for email in quoting_emails:
            email.subject = _scrubbed(email.subject, spelled)
            email.body = _scrubbed(email.body, spelled)
            email.last_error = personal_data.scrub(email.last_error, spelled)
        for flash in quoting_flashes:
            flash.words = _scrubbed(flash.words, spelled)
    return Counts(emails=len(quoting_emails), flashes=len(quoting_flashes))


def _texts_of(email: OutboxEmail) -> tuple[str | None, ...]:
    return (email.subject, email.body, email.last_error)


def _scrubbed(text: str, spelled: re.Pattern[str]) -> str:
    return spelled.sub(personal_data.MARKER, text)


def _record(session: Session, club_id: str, done: Done) -> None:
    session.add(
        Erasure(
            id=done.id,
            club_id=club_id,
            requested_by=done.requested_by,
            matched_by=done.matched_by,
            started_at=done.started_at,
            finished_at=done.finished_at,
            counts=orjson.dumps(asdict(done.counts)).decode(),
        )
    )
