"""The superadmin page: every club, its Webhooks & API module switched on or off (off only
after a question saying what stops and what is kept), and how many days its event payloads
are kept."""

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

MAX_DIGITS = 6  # of payload days typed: more is no number of days (nor one Python reads fast)


def router() -> APIRouter:
    api = base.router()
    api.add_api_route(urls.ADMIN, admin_page, methods=["GET"])
    api.add_api_route(urls.MODULE, switch_module, methods=["POST"])
    api.add_api_route(urls.MODULE_OFF, switch_off_form, methods=["GET"])
    api.add_api_route(urls.PAYLOAD_DAYS, set_payload_days, methods=["POST"])
    return api


def admin_page(request: Request, staff: Staff) -> Response:
    _superadmin_only(staff)
    return _admin_page(request)


def _admin_page(
    request: Request, status: int = 200, typed: dict[str, str] | None = None, said: str = ""
) -> Response:
    """The page; ``typed``: the payload days typed for one club (slug → text), shown again
    with ``said`` beside them."""
    with context.transaction(request) as session:
        every_club = clubs.list_clubs(session)
    return base.page(
        request,
        "admin.html",
        status,
        clubs=every_club,
        typed=typed or {},
        said=said,
        RETENTION_DAYS=context.of(request).settings.retention_days,
    )


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


def set_payload_days(
    request: Request, staff: Posted, slug: str, payload_days: Annotated[str, Form()] = ""
) -> Response:
    """Keep the club's payloads for the days typed (blank: as long as the history); days
    that cannot be are shown again with the rule."""
    _superadmin_only(staff)
    retention_days = context.of(request).settings.retention_days
    try:
        days = _days(payload_days, retention_days)
        with context.transaction(request) as session:
            club = clubs.set_payload_days(session, slug, days, retention_days, context.now(request))
            kept = clubs.payloads_kept(days, retention_days)
            said = f"Payloads of {club.name} are now kept {kept}."
            base.flash(request, session, staff, flashes.Flash("payload-days", said))
    except errors.InvalidInput as exc:
        return _admin_page(request, 422, {slug: payload_days}, exc.detail)
    return base.redirect(urls.admin_url(slug))


def _days(typed: str, retention_days: int) -> int | None:
    """The whole number typed (blank: None); InvalidInput with the rule for anything else."""
    typed = typed.strip()
    if not typed:
        return None
    if not (typed.isascii() and typed.isdigit() and len(typed) <= MAX_DIGITS):
        raise errors.InvalidInput(clubs.payload_days_rule(retention_days))
    return int(typed)


def _superadmin_only(staff: web_sessions.SignedIn) -> None:
    """Others are told there is nothing here."""
    if not staff.user.is_superadmin:
        raise errors.NotFound("There is no such page.")
