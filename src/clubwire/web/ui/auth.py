"""Sign-in and sign-out for staff, and ``/``, which sends each user to their landing page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from pydantic import AfterValidator
from starlette.responses import Response

from clubwire import errors
from clubwire.domain import device_tokens
from clubwire.services.staff import users, web_sessions
from clubwire.web import context
from clubwire.web.ui import base, security, urls
from clubwire.web.ui.base import Posted, Staff


def router() -> APIRouter:
    api = base.router()
    api.add_api_route(urls.LANDING, landing, methods=["GET"])
    api.add_api_route(urls.SIGN_IN, sign_in_form, methods=["GET"])
    api.add_api_route(urls.SIGN_IN, sign_in, methods=["POST"])
    api.add_api_route(urls.SIGN_OUT, sign_out, methods=["POST"])
    return api


def landing(staff: Staff) -> Response:
    """Superadmins start on the module switches; club admins on their club's settings."""
    return base.redirect(urls.ADMIN if staff.user.is_superadmin else urls.SETTINGS)


def sign_in_form(
    request: Request, next_path: Annotated[str | None, Query(alias="next")] = None
) -> Response:
    return _form(request, next_path=security.safe_next(next_path) or "")


class SignInForm(base.FormFields):
    email: str = ""
    password: str = ""
    # Where to go afterwards: a path on this site, else nowhere in particular.
    next: Annotated[str, AfterValidator(lambda path: security.safe_next(path) or "")] = ""
    csrf_token: str = ""


def sign_in(request: Request, form: Annotated[SignInForm, Form()]) -> Response:
    """Check the password (throttled), start a new session, and go where the user was going."""
    if not security.same_token(form.csrf_token, request.cookies.get(security.SIGN_IN_COOKIE)):
        raise base.CsrfRefused()
    found = form.unstorable()
    if found:  # not looked up, and not counted toward the throttle: it cannot be stored
        return _form(request, 422, email=form.email, next_path=form.next, found=found)
    outcome = _start_session(request, form.email, form.password)
    if isinstance(outcome, errors.ClubwireError):
        status = 429 if isinstance(outcome, errors.TooManyAttempts) else 422
        found = {"password": outcome.detail}
        return _form(request, status, email=form.email, next_path=form.next, found=found)
    token, user_id = outcome
    response = base.redirect(security.safe_next(form.next) or urls.LANDING)
    settings = context.of(request).settings
    secure = security.is_https(request, settings)
    security.set_cookie(response, security.SESSION_COOKIE, token, secure=secure)
    device = device_tokens.issue(settings.secret_key_value(), user_id, context.now(request))
    lifetime = int(device_tokens.LIFETIME.total_seconds())
    security.set_cookie(response, security.DEVICE_COOKIE, device, secure=secure, max_age=lifetime)
    return response


def _start_session(
    request: Request, email: str, password: str
) -> tuple[str, str] | errors.ClubwireError:
    """A new session's token and its user's id, or why not. Failures are committed: they
    count toward the throttle (``services.staff.sign_ins``)."""
    address = request.client.host if request.client else "unknown"
    previous = request.cookies.get(security.SESSION_COOKIE)
    now = context.now(request)
    secret_key = context.of(request).settings.secret_key_value()
    device = device_tokens.read(secret_key, request.cookies.get(security.DEVICE_COOKIE), now)
    with context.transaction(request) as session:
        try:
            user = users.authenticate(session, email, password, now, address, device)
        except (errors.Unauthenticated, errors.TooManyAttempts) as exc:
            return exc
        if previous:
            web_sessions.end(session, previous)
        return web_sessions.start(session, user, now), user.id


def _form(
    request: Request,
    status: int = 200,
    email: str = "",
    next_path: str = "",
    found: dict[str, str] | None = None,
) -> Response:
    """The sign-in form, with its double-submit CSRF token in a cookie and a hidden field."""
    token = request.cookies.get(security.SIGN_IN_COOKIE) or security.new_token()
    response = base.page(
        request,
        "sign_in.html",
        status,
        email=email,
        next_path=security.safe_next(next_path) or "",
        errors=found or {},
        csrf_token=token,
    )
    secure = security.is_https(request, context.of(request).settings)
    security.set_cookie(response, security.SIGN_IN_COOKIE, token, secure=secure)
    return response


def sign_out(request: Request, _staff: Posted) -> Response:
    """End the session on the server and forget the cookie."""
    with context.transaction(request) as session:
        web_sessions.end(session, request.cookies.get(security.SESSION_COOKIE, ""))
    response = base.redirect(urls.SIGN_IN)
    secure = security.is_https(request, context.of(request).settings)
    security.clear_cookie(response, security.SESSION_COOKIE, secure=secure)
    return response
