"""What every settings-area route shares: who is signed in, the CSRF check, one transaction
per step, HTML pages, and errors answered as HTML pages rather than problem+json."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Annotated, Any, ClassVar

from fastapi import APIRouter, Depends, Form, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel
from sqlalchemy.orm import Session
from starlette.responses import HTMLResponse, RedirectResponse, Response

from clubwire import errors
from clubwire.domain import text
from clubwire.services.staff import flashes, users, web_sessions
from clubwire.storage.models import Club
from clubwire.web import context, problems
from clubwire.web.ui import security, templating, urls

# The name it had before the settings area became a package: log lines are filtered on it.
log = logging.getLogger("clubwire.web.ui_base")

MAX_LOGGED_PATH = 200
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class SignInRequired(Exception):
    """Nobody is signed in (or the session has ended): go to the sign-in page."""

    def __init__(self, next_path: str | None) -> None:
        self.next_path = next_path
        super().__init__(next_path)


class FormRefused(Exception):
    """A form refused before it did anything: a 403 page that says why (``words``)."""

    words: ClassVar[str]


class CsrfRefused(FormRefused):
    """A POST without this session's CSRF token."""

    words = (
        "This form was refused because its security token is missing or out of date, "
        "so nothing was changed. Go back, reload the page and try again."
    )


class CrossSiteRefused(FormRefused):
    """A request that would change something, sent by another site's page."""

    words = (
        "This form was refused because it was sent from another website, so nothing was "
        "changed. To make this change, open the settings here directly and use the form on "
        "their own page."
    )


@dataclass(frozen=True, slots=True)
class ClubName:
    """What a page shows of a club, kept apart from the ORM (which a rollback expires)."""

    slug: str
    name: str


class ModuleOff(Exception):
    """The club's Webhooks & API module is off: its settings show only a message."""

    def __init__(self, club: Club) -> None:
        self.club = ClubName(club.slug, club.name)
        super().__init__(club.slug)


def page(request: Request, name: str, status: int = 200, **values: object) -> HTMLResponse:
    """The page ``name``, with the flashes left for it (each page shows them once)."""
    staff = context.staff(request)
    shown = [] if staff is None else _taken(request, staff)
    return _render(request, name, status, shown, **values)


def _render(
    request: Request, name: str, status: int, shown: list[flashes.Flash], **values: object
) -> HTMLResponse:
    staff = context.staff(request)
    return templating.render(request, name, status, staff=staff, flashes=shown, **values)


def _taken(request: Request, staff: web_sessions.SignedIn) -> list[flashes.Flash]:
    running = context.of(request)
    with context.transaction(request) as session:
        return flashes.take(session, running.settings, staff.session_id, running.now())


def flash(
    request: Request, session: Session, staff: web_sessions.SignedIn, said: flashes.Flash
) -> None:
    """Tell the next page of this session what was done (in the action's transaction)."""
    running = context.of(request)
    flashes.add(session, running.settings, staff.session_id, said, running.now())


def message(request: Request, status: int, title: str, text: str) -> HTMLResponse:
    """A plain page that says one thing (errors, refusals); it leaves the flashes for the next
    page, and needs no database (which may be what failed)."""
    return _render(request, "message.html", status, [], title=title, text=text)


def redirect(url: str) -> RedirectResponse:
    """See other: the answer to a POST that worked (the browser then GETs ``url``, where a
    ``flash`` left by the POST says what it did)."""
    return RedirectResponse(url, status_code=303)


# -- who is signed in, and CSRF ------------------------------------------------------------


def signed_in(request: Request) -> web_sessions.SignedIn:
    """The signed-in staff member; otherwise off to the sign-in page (and back afterwards)."""
    token = request.cookies.get(security.SESSION_COOKIE)
    found = None
    if token:
        with context.transaction(request) as session:
            found = web_sessions.find(session, token, context.now(request))
    if found is None:
        raise SignInRequired(_here(request) if request.method == "GET" else None)
    context.remember_staff(request, found)
    return found


def _here(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


Staff = Annotated[web_sessions.SignedIn, Depends(signed_in)]


def checked(staff: Staff, csrf_token: Annotated[str, Form()] = "") -> web_sessions.SignedIn:
    """The signed-in staff member, for a POST that carries this session's CSRF token."""
    if not security.same_token(csrf_token, staff.csrf_token):
        raise CsrfRefused()
    return staff


Posted = Annotated[web_sessions.SignedIn, Depends(checked)]


def same_site(request: Request) -> None:
    """Refuse a request that changes something when the browser says another site's page
    sent it (``Sec-Fetch-Site``, ``Origin``): with the CSRF token, a second lock on every
    form of the settings area, sign-in and sign-out included (ADR 0006)."""
    if request.method in security.SAFE_METHODS:
        return
    settings = context.of(request).settings
    scheme = str(request.scope["scheme"])  # not request.url, which a broken Host can break
    why = security.from_another_site(request.headers, scheme, settings)
    if why is not None:
        path = text.cleaned(request.scope["path"], MAX_LOGGED_PATH)
        log.warning("refused a %s to %s from another site (%s)", request.method, path, why)
        raise CrossSiteRefused()


def club_for(session: Session, staff: web_sessions.SignedIn, slug: str) -> Club:
    """The club if this user manages it (else not found) and its module is on."""
    club = users.managed_club(session, staff.user, slug)
    if not club.webhooks_enabled:
        raise ModuleOff(club)
    return club


# -- errors as pages -------------------------------------------------------------------------


def error_page(request: Request, exc: Exception) -> Response:
    """The HTML answer to an error raised by a settings-area route."""
    if isinstance(exc, SignInRequired):
        return redirect(urls.sign_in_url(exc.next_path))
    if isinstance(exc, FormRefused):
        return message(request, 403, "Form refused", exc.words)
    if isinstance(exc, ModuleOff):
        status = 200 if request.method == "GET" else 403
        return page(request, "module_off.html", status, club=exc.club)
    known = problems.recognised(exc)  # a clubwire error, or the database is unavailable
    if known is not None:
        status = problems.status_of(known)
        shown = message(request, status, HTTPStatus(status).phrase, known.detail)
        shown.headers.update(problems.headers_of(known) or {})
        return shown
    if isinstance(exc, RequestValidationError):
        return message(request, 422, "Form not understood", "The form was not complete.")
    log.error("unhandled error in the settings area", exc_info=exc)
    return message(request, 500, "Something went wrong", "It has been logged; please try again.")


class UiRoute(APIRoute):
    """A route whose errors become HTML pages (and sign-in redirects)."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # every error becomes a page
                return error_page(request, exc)

        return guarded


def router() -> APIRouter:
    """A router for settings-area pages: HTML errors, forms from other sites refused, left
    out of the OpenAPI document."""
    return APIRouter(
        route_class=UiRoute,
        include_in_schema=False,
        default_response_class=HTMLResponse,
        dependencies=[Depends(same_site)],
    )


# -- forms -----------------------------------------------------------------------------------


class FormFields(BaseModel):
    """A form's fields as typed. Text the database cannot hold is not refused while the form
    is read, which would lose what was typed, but by ``unstorable``, so that the form comes
    back with the message beside the field."""

    def unstorable(self) -> dict[str, str]:
        """Each text field the database could not hold, with why, by field name. (Lists are
        choices, checked against what may be chosen.)"""
        found = {}
        for name, value in self:
            why = text.refusal(value) if isinstance(value, str) else None
            if why is not None:
                found[name] = f"{why[:1].upper()}{why[1:]}."
        return found


def field_errors(**checks: Callable[[], object]) -> dict[str, str]:
    """Each field's message from the services' own checks, by field name (none: all good)."""
    found = {}
    for field, check in checks.items():
        try:
            check()
        except errors.InvalidInput as exc:
            found[field] = exc.detail
    return found


Step = Callable[[Session, Club], Response]
# Which field of a form each kind of service error is shown beside (a subclass as its kind).
ErrorFields = Mapping[type[errors.ClubwireError], str]
# The page that shows a form again, as typed, with each field's message (never none).
FormPage = Callable[[Request, Session, Club, dict[str, str]], Response]


def form_step(
    request: Request,
    staff: web_sessions.SignedIn,
    slug: str,
    found: dict[str, str],
    step: Step,
    error_fields: ErrorFields,
    again: FormPage,
) -> Response:
    """Do ``step`` in one transaction on the user's club, unless the form's own checks
    ``found`` errors; a service error of a kind in ``error_fields`` rolls the step back, and
    the form is shown ``again`` with its message beside that kind's field."""
    try:
        with context.transaction(request) as session:
            club = club_for(session, staff, slug)
            return again(request, session, club, found) if found else step(session, club)
    except tuple(error_fields) as exc:
        with context.transaction(request) as session:
            club = club_for(session, staff, slug)
            return again(request, session, club, _beside(error_fields, exc))


def _beside(error_fields: ErrorFields, exc: errors.ClubwireError) -> dict[str, str]:
    field = next(field for kind, field in error_fields.items() if isinstance(exc, kind))
    return {field: exc.detail}
