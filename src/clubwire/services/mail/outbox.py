"""The email outbox: emails are written in the transaction of the change they tell of
(``enqueue``) and sent by a worker, one at a time, each under a lease (``take``), until the
mail server accepts it (``sent``) or it runs out of tries (``failed``).

At least once: a worker that dies after the server accepted an email but before ``sent``
was recorded leaves that one email to be sent again when its lease runs out. Several workers
on PostgreSQL never take the same email together (``FOR UPDATE SKIP LOCKED``); SQLite has
one worker.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire import ids
from clubwire.domain import text
from clubwire.domain.emails import Draft
from clubwire.storage.models import OutboxEmail

# Named as before the move into a sub-package: log lines carry the name ("logger").
log = logging.getLogger("clubwire.services.outbox")

# Seconds to wait after each failed try; after the last, the email is given up (~16 hours).
RETRY_DELAYS = (30, 60, 300, 900, 1800, 3600, 7200, 14400, 28800)
ERROR_LIMIT = 200  # email_outbox.last_error


@dataclass(frozen=True, slots=True)
class Taken:
    """An email a worker holds the lease of, with what it needs to send it."""

    id: str
    recipient: str
    draft: Draft
    created_at: datetime
    tries: int  # this one included
    token: str


def enqueue(
    session: Session, club_id: str, recipients: Iterable[str], draft: Draft, now: datetime
) -> None:
    """Queue ``draft`` to each recipient, due now, in the caller's transaction."""
    rows = [
        {
            "id": ids.new_id("eml"),
            "club_id": club_id,
            "recipient": recipient,
            "subject": draft.subject,
            "body": draft.body,
            "created_at": now,
            "attempts": 0,
            "next_attempt_at": now,
        }
        for recipient in recipients
    ]
    if rows:
        session.execute(insert(OutboxEmail), rows)


def take(sessions: sessionmaker[Session], now: datetime, lease: timedelta) -> Taken | None:
    """The email due first, leased to the caller until ``now + lease``; None when none is
    due. A look that writes nothing (most of the time nothing is due), then one statement
    that takes the email, so two takers can never both have it, on either database."""
    due = (
        select(OutboxEmail.id)
        .where(OutboxEmail.next_attempt_at <= now)
        .order_by(OutboxEmail.next_attempt_at)
        .limit(1)
    )
    with sessions() as session:
        if session.scalar(due) is None:
            return None
    token = ids.random_base62(24)
    with sessions.begin() as session:
        row = session.execute(
            update(OutboxEmail)
            .where(OutboxEmail.id == due.with_for_update(skip_locked=True).scalar_subquery())
            .values(
                next_attempt_at=now + lease,
                lease_token=token,
                attempts=OutboxEmail.attempts + 1,
            )
            .returning(
                OutboxEmail.id,
                OutboxEmail.recipient,
                OutboxEmail.subject,
                OutboxEmail.body,
                OutboxEmail.created_at,
                OutboxEmail.attempts,
            ),
            execution_options={"synchronize_session": False},
        ).one_or_none()
    if row is None:  # another taker was first
        return None
    email_id, recipient, subject, body, created_at, tries = row
    return Taken(email_id, recipient, Draft(subject, body), created_at, tries, token)


def sent(sessions: sessionmaker[Session], taken: Taken, now: datetime) -> None:
    """The mail server accepted it: never send it again (even if the lease ran out)."""
    with sessions.begin() as session:
        session.execute(
            update(OutboxEmail)
            .where(OutboxEmail.id == taken.id, OutboxEmail.sent_at.is_(None))
            .values(sent_at=now, next_attempt_at=None, lease_token=None, last_error=None),
            execution_options={"synchronize_session": False},
        )


def failed(sessions: sessionmaker[Session], taken: Taken, error: str, now: datetime) -> None:
    """Try again later, or give up after the last delay. Nothing changes if another worker
    has taken it since (the lease ran out)."""
    retry = retry_at(taken.tries, now)
    with sessions.begin() as session:
        session.execute(
            update(OutboxEmail)
            .where(OutboxEmail.id == taken.id, OutboxEmail.lease_token == taken.token)
            .values(
                next_attempt_at=retry,
                lease_token=None,
                last_error=text.cleaned(error, ERROR_LIMIT),
            ),
            execution_options={"synchronize_session": False},
        )
    if retry is None:
        log.error("gave up the email %s after %d tries: %s", taken.id, taken.tries, error)


def retry_at(tries: int, now: datetime) -> datetime | None:
    """When to try again after ``tries`` failed tries; None: give up."""
    if tries > len(RETRY_DELAYS):
        return None
    return now + timedelta(seconds=RETRY_DELAYS[tries - 1])
