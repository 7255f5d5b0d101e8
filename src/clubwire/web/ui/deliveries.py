"""Deliveries in the Webhooks tab: an endpoint's deliveries page by page, a delivery's
attempts, Retry, and Send test."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from clubwire.domain import delivery_pages
from clubwire.domain.delivery_pages import Cursor, Filters
from clubwire.services import endpoints
from clubwire.services.delivery import attempts, deliveries, pings
from clubwire.services.staff import flashes, web_sessions
from clubwire.storage.models import Club
from clubwire.web import context
from clubwire.web.ui import base, security, urls
from clubwire.web.ui.base import Posted, Staff


class DeliveryFilters(base.FormFields):
    """The filters of the deliveries page, a GET form (so a page's address can be shared and
    reloaded), and the page's cursor: ``older`` or ``newer`` than a delivery."""

    status: str = ""
    event: str = ""
    since: str = ""
    until: str = ""
    older: str = ""
    newer: str = ""

    def errors(self) -> dict[str, str]:
        """Each field's message; ``page`` for a cursor that is not one of ours."""
        return self.unstorable() or base.field_errors(
            status=lambda: delivery_pages.status(self.status),
            event=lambda: delivery_pages.kind(self.event),
            since=lambda: delivery_pages.since(self.since),
            until=lambda: delivery_pages.until(self.until),
            page=lambda: (self.cursor(self.older), self.cursor(self.newer)),
        )

    def filters(self) -> Filters:
        return Filters(
            delivery_pages.status(self.status),
            delivery_pages.kind(self.event),
            delivery_pages.since(self.since),
            delivery_pages.until(self.until),
        )

    @staticmethod
    def cursor(value: str) -> Cursor | None:
        return Cursor.decode(value) if value else None

    def link(self, path: str, direction: str = "", cursor: Cursor | None = None) -> str:
        """The address of this page's filters, on the page ``direction`` of ``cursor``."""
        fields = {"status": self.status, "event": self.event}
        fields |= {"since": self.since, "until": self.until}
        if cursor is not None:
            fields[direction] = cursor.encode()
        query = urlencode({key: value for key, value in fields.items() if value})
        return f"{path}?{query}" if query else path


def router() -> APIRouter:
    api = base.router()
    api.add_api_route(urls.DELIVERIES, deliveries_page, methods=["GET"])
    api.add_api_route(urls.DELIVERY, delivery_page, methods=["GET"])
    api.add_api_route(urls.RETRY, retry, methods=["POST"])
    api.add_api_route(urls.SEND_TEST, send_test, methods=["POST"])
    return api


def deliveries_page(
    request: Request,
    staff: Staff,
    slug: str,
    endpoint_id: str,
    typed: Annotated[DeliveryFilters, Query()],
) -> Response:
    """An endpoint's deliveries, newest first, filtered, a keyset page at a time; typed
    filters that cannot be read are shown again with their messages (and no rows)."""
    found = typed.errors()
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        endpoint = endpoints.get_endpoint(session, club.id, endpoint_id)
        page = None
        if not found:
            page = deliveries.page_of_deliveries(
                session,
                club.id,
                endpoint.id,
                typed.filters(),
                older_than=typed.cursor(typed.older),
                newer_than=typed.cursor(typed.newer),
            )
        path = request.url.path
        return base.page(
            request,
            "deliveries.html",
            422 if found else 200,
            club=club,
            endpoint=endpoint,
            typed=typed,
            errors=found,
            page=page,
            tests=pings.outcomes(session, page.rows) if page else {},
            held=deliveries.held(session, page.rows) if page else {},
            here=f"{path}?{request.url.query}" if request.url.query else path,
            older=page and page.older and typed.link(path, "older", page.older),
            newer=page and page.newer and typed.link(path, "newer", page.newer),
            newest=(typed.older or typed.newer) and typed.link(path),
            STATUSES=delivery_pages.STATUSES,
            KINDS=delivery_pages.KINDS,
        )


def delivery_page(request: Request, staff: Staff, slug: str, delivery_id: str) -> Response:
    """One delivery: its state (held in its line: what it waits for), its event's payload
    (unless it expired) and every attempt, with the receiver's answer (escaped)."""
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        delivery = deliveries.get_delivery(session, club.id, delivery_id)
        return base.page(
            request,
            "delivery.html",
            club=club,
            delivery=delivery,
            endpoint=endpoints.get_endpoint(session, club.id, delivery.endpoint_id),
            attempts=deliveries.attempts_of(session, delivery),
            held=deliveries.held(session, [delivery]),
            body=deliveries.body_of(session, delivery).decode(errors="replace"),
        )


def retry(
    request: Request,
    staff: Posted,
    slug: str,
    delivery_id: str,
    next_path: Annotated[str, Form(alias="next")] = "",
) -> Response:
    """Retry now; then back to the page the button was on (within this club's settings)."""
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        delivery = deliveries.retry(session, club.id, delivery_id, context.now(request))
        said = f"Delivery {delivery_id} will be sent again now."
        base.flash(request, session, staff, flashes.Flash("delivery-retried", said))
    return base.redirect(_back(club, next_path, delivery.endpoint_id))


def _back(club: Club, next_path: str, endpoint_id: str) -> str:
    back = security.safe_next(next_path)
    if back is not None and back.startswith(f"{urls.club_url(club)}/"):
        return back
    return urls.webhooks_url(club, endpoint_id)


async def send_test(request: Request, staff: Posted, slug: str, endpoint_id: str) -> Response:
    """A ``ping`` to this endpoint, one attempt; then back to the tab, which says how it went."""
    club = await run_in_threadpool(_club_of_endpoint, request, staff, slug, endpoint_id)
    running = context.of(request)
    settings, clock = running.settings, running.clock
    async with attempts.attempter(settings, clock, running.metrics) as sends:
        result = await pings.send_test(
            settings, running.sessions, sends, club.id, endpoint_id, clock
        )
    kind = "test-sent" if result.ok else "test-failed"
    tested = flashes.Flash(kind, f"Send test: {pings.plain(result)}", endpoint_id)
    await run_in_threadpool(_tell, request, staff, tested)
    return base.redirect(urls.webhooks_url(club, endpoint_id))


def _club_of_endpoint(
    request: Request, staff: web_sessions.SignedIn, slug: str, endpoint_id: str
) -> Club:
    """The user's club, if the endpoint is one of its own (else not found)."""
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        endpoints.get_endpoint(session, club.id, endpoint_id)
        return club


def _tell(request: Request, staff: web_sessions.SignedIn, said: flashes.Flash) -> None:
    with context.transaction(request) as session:
        base.flash(request, session, staff, said)
