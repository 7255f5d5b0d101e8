"""The emails about failing endpoints on the Webhooks tab: whether email is on at all, and
each admin's own switch for them (a small form; its POST answers with a redirect)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import APIRouter, Form, Request
from sqlalchemy.orm import Session
from starlette.responses import Response

from clubwire.domain import emails
from clubwire.services.mail import notifications
from clubwire.services.staff import flashes
from clubwire.storage.models import Club
from clubwire.web import context
from clubwire.web.ui import base, urls
from clubwire.web.ui.base import Posted


@dataclass(frozen=True, slots=True)
class EmailPanel:
    """``on``: the service can send email; ``wanted``: this admin gets the club's emails
    (None: not an admin of the club, so never a recipient)."""

    on: bool
    wanted: bool | None
    warn_at: int = emails.WARN_AT


def router() -> APIRouter:
    api = base.router()
    api.add_api_route(urls.FAILURE_EMAILS, choose, methods=["POST"])
    return api


def panel(request: Request, session: Session, club: Club) -> EmailPanel:
    """What the Webhooks tab says about emails to the signed-in user."""
    staff = context.staff(request)
    on = context.of(request).settings.mail_server is not None
    wanted = None if staff is None else notifications.wants_emails(session, staff.user.id, club.id)
    return EmailPanel(on, wanted)


def choose(
    request: Request, staff: Posted, slug: str, wanted: Annotated[Literal["yes", "no"], Form()]
) -> Response:
    """Turn the club's emails on (``wanted=yes``) or off for the signed-in admin."""
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        notifications.set_wants_emails(session, staff.user.id, club.id, wanted == "yes")
        base.flash(request, session, staff, flashes.Flash("emails-chosen", _chosen(wanted)))
    return base.redirect(urls.emails_url(club))


def _chosen(wanted: str) -> str:
    if wanted == "yes":
        return "You will get an email when one of this club's endpoints fails."
    return "You will no longer get emails about this club's endpoints."
