"""Deliveries in the Webhooks tab: a delivery's attempts, Retry, and Send test."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Form, Request
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from clubwire.domain import jobs
from clubwire.services import attempts, deliveries, endpoints, pings, web_sessions
from clubwire.storage.models import Club
from clubwire.web import security, ui_base, ui_webhooks
from clubwire.web.ui_base import Posted, Staff

DELIVERY = "/settings/{slug}/deliveries/{delivery_id}"


def router() -> APIRouter:
    api = ui_base.router()
    api.add_api_route(DELIVERY, delivery_page, methods=["GET"])
    api.add_api_route(f"{DELIVERY}/retry", retry, methods=["POST"])
    api.add_api_route(f"{ui_webhooks.ENDPOINT}/test", send_test, methods=["POST"])
    return api


def delivery_page(request: Request, staff: Staff, slug: str, delivery_id: str) -> Response:
    """One delivery: its state and every attempt, with the receiver's answer (escaped)."""
    with ui_base.transaction(request) as session:
        club = ui_base.club_for(session, staff, slug)
        delivery = deliveries.get_delivery(session, club.id, delivery_id)
        return ui_base.page(
            request,
            "delivery.html",
            club=club,
            delivery=delivery,
            endpoint=endpoints.get_endpoint(session, club.id, delivery.endpoint_id),
            attempts=deliveries.attempts_of(session, delivery),
        )


def retry(
    request: Request,
    staff: Posted,
    slug: str,
    delivery_id: str,
    next_path: Annotated[str, Form(alias="next")] = "",
) -> Response:
    """Retry now; then back to the page the button was on (within this club's settings)."""
    with ui_base.transaction(request) as session:
        club = ui_base.club_for(session, staff, slug)
        delivery = deliveries.retry(session, club.id, delivery_id, ui_base.now(request))
    return ui_base.redirect(_back(club, next_path, delivery.endpoint_id))


def _back(club: Club, next_path: str, endpoint_id: str) -> str:
    back = security.safe_next(next_path)
    if back is not None and back.startswith(f"/settings/{club.slug}/"):
        return back
    return ui_webhooks.tab_url(club, endpoint_id)


async def send_test(request: Request, staff: Posted, slug: str, endpoint_id: str) -> Response:
    """A ``ping`` to this endpoint, one attempt; the outcome is shown on the tab it came from."""
    club = await run_in_threadpool(_club_of_endpoint, request, staff, slug, endpoint_id)
    settings = ui_base.settings_of(request)
    clock: Callable[[], datetime] = request.state.clock
    sessions: sessionmaker[Session] = request.state.sessions
    async with attempts.attempter(settings, clock, request.state.metrics) as sends:
        result = await pings.send_test(settings, sessions, sends, club.id, endpoint_id, clock)
    tested = ui_webhooks.Tested(endpoint_id, result.ok, jobs.plain(result))
    return await run_in_threadpool(_tab, request, staff, slug, tested)


def _club_of_endpoint(
    request: Request, staff: web_sessions.SignedIn, slug: str, endpoint_id: str
) -> Club:
    """The user's club, if the endpoint is one of its own (else not found)."""
    with ui_base.transaction(request) as session:
        club = ui_base.club_for(session, staff, slug)
        endpoints.get_endpoint(session, club.id, endpoint_id)
        return club


def _tab(
    request: Request, staff: web_sessions.SignedIn, slug: str, tested: ui_webhooks.Tested
) -> Response:
    with ui_base.transaction(request) as session:
        club = ui_base.club_for(session, staff, slug)
        return ui_webhooks.webhooks_page(request, session, club, tested=tested)
