"""Emails to a club's admins when one of its endpoints fails: once when it reaches
``emails.WARN_AT`` dead deliveries in a row, once when it is switched off (at the limit, or at
once when its receiver answered 410 Gone). Queued in the outbox in the transaction that records
the dead delivery or the 410 (``services.delivery.records``), to every admin of the club who
has not turned them off; nothing at all when email is off.

One email per crossing: the warning goes when a batch of attempts takes the count from
below ``WARN_AT`` to ``WARN_AT`` or more, so a recovery (a success resets the count) or
switching the endpoint on again arms it again. A batch that also switches the endpoint off
sends only that email: the warning would already be out of date.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from clubwire import errors, logs
from clubwire.domain import delivering, emails, off_reasons
from clubwire.domain.delivering import Result
from clubwire.services.mail import outbox
from clubwire.settings import Settings
from clubwire.storage.models import Club, ClubAdmin, Endpoint, User


@dataclass(frozen=True, slots=True)
class Died:
    """How many deliveries of an endpoint died in a batch (none, when a Retry of a finished
    delivery answered 410 Gone switched it off), and the attempt an email tells of: the one
    answered 410, else its last attempt there."""

    count: int
    last: Result


@dataclass(frozen=True, slots=True)
class FailureMail:
    """Queues the emails; exists only when email is on (``for_settings``)."""

    public_url: str

    def notify(
        self,
        session: Session,
        died: Mapping[str, Died],
        switched: Mapping[str, off_reasons.OffReason],
        now: datetime,
    ) -> None:
        """Queue the emails the batch's dead deliveries and switch-offs (``switched``, each
        endpoint's reason) call for, in its transaction (run after the batch's counts were
        written: ``dead_in_a_row`` is the new count)."""
        if not died:
            return
        rows = session.execute(
            select(Endpoint.id, Endpoint.url, Endpoint.enabled, Endpoint.dead_in_a_row, Club)
            .join(Club, Club.id == Endpoint.club_id)
            .where(Endpoint.id.in_(died))
            .order_by(Endpoint.id)
        ).all()
        for endpoint_id, url, enabled, dead, club in rows:
            facts = _facts(self.public_url, club, endpoint_id, url, died[endpoint_id])
            if endpoint_id in switched:
                why = switched[endpoint_id]
                chosen = emails.switched_off(facts, why, delivering.DEAD_IN_A_ROW_LIMIT)
            elif enabled and dead - died[endpoint_id].count < emails.WARN_AT <= dead:
                chosen = emails.failing(facts, dead, delivering.DEAD_IN_A_ROW_LIMIT)
            else:
                continue
            outbox.enqueue(session, club.id, recipients(session, club.id), chosen, now)


def for_settings(settings: Settings) -> FailureMail | None:
    """The mailer, or None when email is off (no SMTP settings): then nothing is queued."""
    if settings.mail_server is None:
        return None
    return FailureMail(settings.public_url)


def endpoint_link(public_url: str, slug: str, endpoint_id: str) -> str:
    """The endpoint in the settings area (its card on the Webhooks tab)."""
    return f"{public_url}/settings/{slug}/webhooks#endpoint-{endpoint_id}"


def _facts(
    public_url: str, club: Club, endpoint_id: str, url: str, died: Died
) -> emails.FailingEndpoint:
    return emails.FailingEndpoint(
        club_name=club.name,
        url=url,
        link=endpoint_link(public_url, club.slug, endpoint_id),
        response_code=died.last.response_code,
        # Not the receiver's words: the email goes where an erasure cannot follow it.
        error=logs.unquoted(died.last.error, died.last.location),
    )


def recipients(session: Session, club_id: str) -> Sequence[str]:
    """The email addresses of the club's admins who get these emails."""
    return session.scalars(
        select(User.email)
        .join(ClubAdmin, ClubAdmin.user_id == User.id)
        .where(ClubAdmin.club_id == club_id, ClubAdmin.failure_emails.is_(True))
        .order_by(User.email)
    ).all()


def wants_emails(session: Session, user_id: str, club_id: str) -> bool | None:
    """Whether this admin gets the club's emails; None when the user is not its admin
    (a superadmin who manages every club gets none)."""
    return session.scalar(
        select(ClubAdmin.failure_emails).where(
            ClubAdmin.user_id == user_id, ClubAdmin.club_id == club_id
        )
    )


def set_wants_emails(session: Session, user_id: str, club_id: str, wanted: bool) -> None:
    """Turn the club's emails on or off for this admin (only for themselves)."""
    changed = session.execute(
        update(ClubAdmin)
        .where(ClubAdmin.user_id == user_id, ClubAdmin.club_id == club_id)
        .values(failure_emails=wanted),
        execution_options={"synchronize_session": False},
    )
    if changed.rowcount != 1:  # type: ignore[attr-defined]
        raise errors.Forbidden("Only an admin of this club gets its emails.")
