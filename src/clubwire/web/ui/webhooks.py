"""The Webhooks tab of Webhooks & API: endpoints, their switch, edit (their headers of their
own too), delete, rotate secret."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Form, Request
from pydantic import Field
from sqlalchemy.orm import Session
from starlette.responses import Response

from clubwire import errors
from clubwire.domain import max_rates, off_reasons
from clubwire.domain.custom_headers import Header
from clubwire.services import endpoints
from clubwire.services.delivery import deliveries, pings
from clubwire.services.staff import flashes
from clubwire.settings import Settings
from clubwire.storage.models import Club, Delivery, Endpoint
from clubwire.web import context
from clubwire.web.ui import base, emails, urls
from clubwire.web.ui.base import Posted, Staff

RECENT_DELIVERIES = 10
# What the services refuse of the Add and Edit forms shows above the form, but what they
# refuse of its headers (ten at most, one to remove that is gone), above the headers.
ERROR_FIELDS: base.ErrorFields = {errors.BadHeaders: "headers", errors.InvalidInput: "form"}
# Where a refusal of a header typed is shown, by the part refused (``errors.BadHeaders``).
HEADER_FIELDS = {"name": "header_name", "value": "header_value", "headers": "headers"}
RETYPE = "Type the value again: a header's value is never shown back."


class EndpointForm(base.FormFields):
    """What the Add and Edit forms of an endpoint send (and show again with errors)."""

    url: str = ""
    event: list[str] = Field(default_factory=list)
    max_rate: str = ""  # deliveries per second; empty: no limit
    header_name: str = ""  # a header to add or replace, and its value (never shown back)
    header_value: str = ""
    remove_header: list[str] = Field(default_factory=list)  # names of saved headers
    ordered: str = ""  # "yes": each resource's events in order

    def errors(self, settings: Settings) -> dict[str, str]:
        """Each field's message: text the database cannot hold, else the services' checks
        (which are never given such text)."""
        return (
            self.unstorable()
            or base.field_errors(
                url=lambda: endpoints.check_url(self.url, settings),
                events=lambda: endpoints.subscribable(self.event),
                max_rate=self.rate,
            )
            | self._header_errors()
        )

    def rate(self) -> max_rates.MaxRate:
        return endpoints.read_max_rate(self.max_rate)

    def in_order(self) -> bool:
        return self.ordered == "yes"

    def headers(self) -> list[Header]:
        """The header typed, to add or replace one of the same name; none if none was."""
        if not (self.header_name or self.header_value):
            return []
        return [endpoints.read_header_fields(self.header_name, self.header_value)]

    def _header_errors(self) -> dict[str, str]:
        try:
            self.headers()
        except errors.BadHeaders as exc:
            return {HEADER_FIELDS[exc.part]: exc.detail}
        return {}

    def asking_again(self, found: dict[str, str]) -> dict[str, str]:
        """``found``, the errors of a form shown again, and the value of the header typed
        asked for again: it is never shown back."""
        if not found or not self.header_value or "header_value" in found:
            return found
        return {**found, "header_value": RETYPE}

    @classmethod
    def of(cls, endpoint: Endpoint) -> EndpointForm:
        """The form filled in with what is saved."""
        rate = "" if endpoint.max_rate is None else str(endpoint.max_rate)
        ordered = "yes" if endpoint.ordered else ""
        return cls(url=endpoint.url, event=endpoint.events.split(), max_rate=rate, ordered=ordered)


Filled = Annotated[EndpointForm, Form()]


@dataclass(frozen=True, slots=True)
class EndpointView:
    """An endpoint with its Recent deliveries panel and what re-enabling it could resend."""

    endpoint: Endpoint
    recent: Sequence[Delivery]
    skipped: int
    tests: Mapping[str, pings.PingOutcome]  # the Send tests among ``recent``, by delivery id
    held: Mapping[str, int]  # those of ``recent`` held in their line: the sequence awaited
    headers: Sequence[str]  # the names of its headers of its own


def router() -> APIRouter:
    api = base.router()
    api.add_api_route(urls.WEBHOOKS, webhooks_tab, methods=["GET"])
    api.add_api_route(urls.WEBHOOKS, create_endpoint, methods=["POST"])
    api.add_api_route(urls.ENDPOINT_EDIT, edit_form, methods=["GET"])
    api.add_api_route(urls.ENDPOINT_EDIT, update_endpoint, methods=["POST"])
    api.add_api_route(urls.ENDPOINT_DELETE, delete_form, methods=["GET"])
    api.add_api_route(urls.ENDPOINT_DELETE, delete_endpoint, methods=["POST"])
    api.add_api_route(urls.ENDPOINT_ROTATE, rotate_form, methods=["GET"])
    api.add_api_route(urls.ENDPOINT_ROTATE, rotate_secret, methods=["POST"])
    api.add_api_route(urls.ENDPOINT_ENABLE, enable, methods=["POST"])
    api.add_api_route(urls.ENDPOINT_DISABLE, disable, methods=["POST"])
    return api


def views(session: Session, club_id: str, settings: Settings) -> list[EndpointView]:
    found = endpoints.list_endpoints(session, club_id)
    return [_view(session, club_id, endpoint, settings) for endpoint in found]


def _view(session: Session, club_id: str, endpoint: Endpoint, settings: Settings) -> EndpointView:
    recent = deliveries.list_deliveries(session, club_id, endpoint.id, limit=RECENT_DELIVERIES)
    return EndpointView(
        endpoint,
        recent,
        0 if endpoint.enabled else endpoints.count_skipped(session, club_id, endpoint.id),
        pings.outcomes(session, recent),
        deliveries.held(session, recent),
        endpoints.header_names(endpoint, settings),
    )


def webhooks_page(
    request: Request,
    session: Session,
    club: Club,
    found: dict[str, str] | None = None,
    *,
    typed: EndpointForm | None = None,
) -> Response:
    """The tab; ``found`` and ``typed``: the Add form again, with its errors."""
    typed = typed or EndpointForm()
    return base.page(
        request,
        "webhooks.html",
        422 if found else 200,
        club=club,
        endpoints=views(session, club.id, context.of(request).settings),
        typed=typed,
        errors=typed.asking_again(found or {}),
        emails=emails.panel(request, session, club),
    )


def webhooks_tab(request: Request, staff: Staff, slug: str) -> Response:
    with context.transaction(request) as session:
        return webhooks_page(request, session, base.club_for(session, staff, slug))


def create_endpoint(request: Request, staff: Posted, slug: str, form: Filled) -> Response:
    """A new endpoint; its signing secret is shown once, on the tab the answer goes back to."""
    settings = context.of(request).settings

    def step(session: Session, club: Club) -> Response:
        now = context.now(request)
        endpoint, secret = endpoints.create_endpoint(
            session,
            club,
            form.url,
            form.event,
            now,
            settings,
            max_rate=form.rate(),
            headers=form.headers(),
            ordered=form.in_order(),
        )
        said = flashes.Flash("endpoint-created", f"Endpoint {endpoint.url} added.", secret=secret)
        base.flash(request, session, staff, said)
        return base.redirect(urls.webhooks_url(club))

    again = partial(webhooks_page, typed=form)
    return base.form_step(request, staff, slug, form.errors(settings), step, ERROR_FIELDS, again)


def edit_form(request: Request, staff: Staff, slug: str, endpoint_id: str) -> Response:
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        endpoint = endpoints.get_endpoint(session, club.id, endpoint_id)
    return _edit_page(request, club, endpoint, EndpointForm.of(endpoint))


def _edit_page(
    request: Request,
    club: Club,
    endpoint: Endpoint,
    typed: EndpointForm,
    found: dict[str, str] | None = None,
) -> Response:
    status = 422 if found else 200
    return base.page(
        request,
        "endpoint_edit.html",
        status,
        club=club,
        endpoint=endpoint,
        typed=typed,
        errors=typed.asking_again(found or {}),
        headers=endpoints.header_names(endpoint, context.of(request).settings),
    )


def update_endpoint(
    request: Request, staff: Posted, slug: str, endpoint_id: str, form: Filled
) -> Response:
    settings = context.of(request).settings

    def step(session: Session, club: Club) -> Response:
        now = context.now(request)
        endpoint = endpoints.update_endpoint(
            session,
            club.id,
            endpoint_id,
            now,
            settings,
            form.url,
            form.event,
            max_rate=form.rate(),
            headers=form.headers(),
            removed=form.remove_header,
            ordered=form.in_order(),
        )
        said = f"Endpoint {endpoint.url} saved."
        base.flash(request, session, staff, flashes.Flash("endpoint-updated", said))
        return base.redirect(urls.webhooks_url(club, endpoint_id))

    again = partial(_edit_again, endpoint_id=endpoint_id, typed=form)
    return base.form_step(request, staff, slug, form.errors(settings), step, ERROR_FIELDS, again)


def _edit_again(
    request: Request,
    session: Session,
    club: Club,
    found: dict[str, str],
    *,
    endpoint_id: str,
    typed: EndpointForm,
) -> Response:
    """The Edit form again, as typed, with its errors."""
    endpoint = endpoints.get_endpoint(session, club.id, endpoint_id)
    return _edit_page(request, club, endpoint, typed, found)


def _confirm(request: Request, staff: Staff, slug: str, endpoint_id: str, name: str) -> Response:
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        endpoint = endpoints.get_endpoint(session, club.id, endpoint_id)
    return base.page(request, name, club=club, endpoint=endpoint)


def delete_form(request: Request, staff: Staff, slug: str, endpoint_id: str) -> Response:
    return _confirm(request, staff, slug, endpoint_id, "endpoint_delete.html")


def delete_endpoint(request: Request, staff: Posted, slug: str, endpoint_id: str) -> Response:
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        deleted = endpoints.delete_endpoint(session, club.id, endpoint_id)
        said = f"Endpoint {deleted.url} deleted, with its deliveries."
        base.flash(request, session, staff, flashes.Flash("endpoint-deleted", said))
    return base.redirect(urls.webhooks_url(club))


def rotate_form(request: Request, staff: Staff, slug: str, endpoint_id: str) -> Response:
    return _confirm(request, staff, slug, endpoint_id, "endpoint_rotate.html")


def rotate_secret(request: Request, staff: Posted, slug: str, endpoint_id: str) -> Response:
    """A new signing secret, shown once on the tab the answer goes back to; the old one stops
    at once."""
    settings = context.of(request).settings
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        now = context.now(request)
        secret = endpoints.rotate_secret(session, club.id, endpoint_id, now, settings)
        url = endpoints.get_endpoint(session, club.id, endpoint_id).url
        said = flashes.Flash("secret-rotated", f"Signing secret of {url} rotated.", secret=secret)
        base.flash(request, session, staff, said)
    return base.redirect(urls.webhooks_url(club))


def enable(
    request: Request,
    staff: Posted,
    slug: str,
    endpoint_id: str,
    resend_skipped: Annotated[str, Form()] = "",
) -> Response:
    """Switch on (dead in a row back to 0), resending what was skipped if asked to."""
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        now = context.now(request)
        endpoint, resent = endpoints.enable_endpoint(
            session, club.id, endpoint_id, now, resend_skipped == "yes"
        )
        said = f"Endpoint {endpoint.url} switched on." + _resent(resent)
        base.flash(request, session, staff, flashes.Flash("endpoint-enabled", said))
    return base.redirect(urls.webhooks_url(club, endpoint_id))


def _resent(count: int) -> str:
    if not count:
        return ""
    return f" {count} skipped {'delivery' if count == 1 else 'deliveries'} will be sent again."


def disable(request: Request, staff: Posted, slug: str, endpoint_id: str) -> Response:
    """Switch off, recording who did it: a club admin, or a superadmin."""
    reason = off_reasons.by_staff(staff.user.is_superadmin)
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        now = context.now(request)
        endpoint = endpoints.disable_endpoint(session, club.id, endpoint_id, now, reason)
        said = f"Endpoint {endpoint.url} switched off."
        base.flash(request, session, staff, flashes.Flash("endpoint-disabled", said))
    return base.redirect(urls.webhooks_url(club, endpoint_id))
