"""Replay… on an endpoint of the Webhooks tab: a form (the window, statuses, kinds), a
preview that counts before anything is sent, and a confirmation that replays and goes back
to the tab (Post/Redirect/Get), where the outcome shows once (a flash).

A second submission of the confirmation (a double click, the form sent again) does nothing:
the page carries a token that the replay spends (``services.staff.confirmations``), so the
tab tells the first one's outcome. Another person's replay of the same window replays
nothing twice either: the service brings forward only deliveries not brought forward yet.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Form, Request
from pydantic import Field
from sqlalchemy.orm import Session
from starlette.responses import Response

from clubwire import errors
from clubwire.domain import event_catalog, replay_window
from clubwire.domain.replay_window import Window
from clubwire.services import endpoints
from clubwire.services.delivery import replays
from clubwire.services.staff import confirmations, flashes
from clubwire.storage.models import Club
from clubwire.web import context
from clubwire.web.ui import base, urls
from clubwire.web.ui.base import Posted, Staff

DEFAULT_HOURS = 24  # the form's window, ending at the next minute
FIELD_TIME = "%Y-%m-%dT%H:%M"  # what an <input type="datetime-local"> holds
# The service's refusals, beside the form as a whole: a window it does not take, and the
# endpoint or the module switched off by now (a conflict).
ERROR_FIELDS: base.ErrorFields = {errors.InvalidInput: "form", errors.Conflict: "form"}


class ReplayForm(base.FormFields):
    """What the Replay form sends (and shows again, with errors, or in the confirmation)."""

    since: str = ""
    until: str = ""
    status: list[str] = Field(default_factory=list)
    event: list[str] = Field(default_factory=list)

    def errors(self) -> dict[str, str]:
        """Each field's message; ``form`` for a window that ends before it starts."""
        found = self.unstorable() or base.field_errors(
            since=lambda: replay_window.minute(self.since, "From"),
            until=lambda: replay_window.minute(self.until, "To"),
            statuses=lambda: replay_window.chosen_statuses(self.status),
            events=lambda: replay_window.chosen_kinds(self.event),
        )
        return found or base.field_errors(form=self.window)

    def window(self) -> Window:
        return replay_window.window(self.since, self.until, self.status, self.event)

    @classmethod
    def starting(cls, now: datetime) -> ReplayForm:
        """The last day, to the next minute; dead and skipped; every kind."""
        until = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
        since = until - timedelta(hours=DEFAULT_HOURS)
        statuses = list(replay_window.DEFAULT_STATUSES)
        return cls(
            since=since.strftime(FIELD_TIME), until=until.strftime(FIELD_TIME), status=statuses
        )


Filled = Annotated[ReplayForm, Form()]
ConfirmationToken = Annotated[str, Form()]  # the preview's token: spent once


def router() -> APIRouter:
    api = base.router()
    api.add_api_route(urls.REPLAY, replay_form, methods=["GET"])
    api.add_api_route(urls.REPLAY_PREVIEW, preview, methods=["POST"])
    api.add_api_route(urls.REPLAY, replay, methods=["POST"])
    return api


def replay_form(request: Request, staff: Staff, slug: str, endpoint_id: str) -> Response:
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        starting = ReplayForm.starting(context.now(request))
        return _form_page(request, session, club, endpoint_id=endpoint_id, typed=starting)


def preview(request: Request, staff: Posted, slug: str, endpoint_id: str, form: Filled) -> Response:
    """How many deliveries the window covers, with the button that replays them."""
    limit = context.of(request).settings.replay_limit

    def step(session: Session, club: Club) -> Response:
        window = form.window()
        counted = replays.preview(session, club.id, endpoint_id, window, limit)
        return base.page(
            request,
            "replay_preview.html",
            club=club,
            endpoint=endpoints.get_endpoint(session, club.id, endpoint_id),
            typed=form,
            window=window,
            counted=counted,
            confirmation=confirmations.new_token(),
        )

    again = partial(_form_page, endpoint_id=endpoint_id, typed=form)
    return base.form_step(request, staff, slug, form.errors(), step, ERROR_FIELDS, again)


def replay(
    request: Request,
    staff: Posted,
    slug: str,
    endpoint_id: str,
    form: Filled,
    confirmation: ConfirmationToken = "",
) -> Response:
    """Replay, then back to the tab, where what was done shows once; the same confirmation
    again goes back to the tab and does nothing."""
    settings = context.of(request).settings

    def step(session: Session, club: Club) -> Response:
        now = context.now(request)
        if confirmations.spend(session, staff.session_id, confirmation, now):
            done = replays.replay(
                session, club.id, endpoint_id, form.window(), now, settings.replay_limit
            )
            said = flashes.Flash("replay-queued", done.summary(preview=False), endpoint_id)
            base.flash(request, session, staff, said)
        return base.redirect(urls.webhooks_url(club, endpoint_id))

    again = partial(_form_page, endpoint_id=endpoint_id, typed=form)
    return base.form_step(request, staff, slug, form.errors(), step, ERROR_FIELDS, again)


def _form_page(
    request: Request,
    session: Session,
    club: Club,
    found: dict[str, str] | None = None,
    *,
    endpoint_id: str,
    typed: ReplayForm,
) -> Response:
    """The form, as typed, with the messages of ``found`` (none: the form as it starts)."""
    endpoint = endpoints.get_endpoint(session, club.id, endpoint_id)
    return base.page(
        request,
        "replay.html",
        422 if found else 200,
        club=club,
        endpoint=endpoint,
        typed=typed,
        errors=found or {},
        STATUSES=replay_window.STATUSES,
        KINDS=event_catalog.SUBSCRIBABLE,
    )
