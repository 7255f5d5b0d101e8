"""The superadmin page: every club, and its Webhooks & API module switched on or off (off
only after a question saying what stops and what is kept)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from starlette.responses import Response

from clubwire import errors
from clubwire.services import clubs
from clubwire.services.staff import flashes, web_sessions
from clubwire.web import context
from clubwire.web.ui import base, urls
from clubwire.web.ui.base import Posted, Staff


def router() -> APIRouter:
    api = base.router()
    api.add_api_route(urls.ADMIN, admin_page, methods=["GET"])
    api.add_api_route(urls.MODULE, switch_module, methods=["POST"])
    api.add_api_route(urls.MODULE_OFF, switch_off_form, methods=["GET"])
    return api


def admin_page(request: Request, staff: Staff) -> Response:
    _superadmin_only(staff)
    with context.transaction(request) as session:
        every_club = clubs.list_clubs(session)
    return base.page(request, "admin.html", clubs=every_club)


def switch_off_form(request: Request, staff: Staff, slug: str) -> Response:
    """The question before switching off, which cuts the club's API and webhooks at once;
    its answer posts ``off`` to ``switch_module``. Switching on asks nothing."""
    _superadmin_only(staff)
    with context.transaction(request) as session:
        club = clubs.get_club(session, slug)
    return base.page(request, "module_switch_off.html", club=club)


def switch_module(
    request: Request, staff: Posted, slug: str, enabled: Annotated[str, Form()] = ""
) -> Response:
    """Switch the module to the state the button names (``on`` or ``off``): a repeated click
    changes nothing more."""
    _superadmin_only(staff)
    if enabled not in ("on", "off"):
        raise errors.InvalidInput("Choose on or off.")
    with context.transaction(request) as session:
        club = clubs.set_webhooks_module(session, slug, enabled == "on", context.now(request))
        said = f"Webhooks & API switched {enabled} for {club.name}."
        base.flash(request, session, staff, flashes.Flash(f"module-{enabled}", said))
    return base.redirect(urls.admin_url(slug))


def _superadmin_only(staff: web_sessions.SignedIn) -> None:
    """Others are told there is nothing here."""
    if not staff.user.is_superadmin:
        raise errors.NotFound("There is no such page.")
