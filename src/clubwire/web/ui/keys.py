"""Club settings: the list of the user's clubs, and the API keys tab of Webhooks & API."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Form, Request
from pydantic import Field
from sqlalchemy.orm import Session
from starlette.responses import Response

from clubwire import errors
from clubwire.domain import scopes
from clubwire.services.club_api import keys
from clubwire.services.staff import flashes, users
from clubwire.storage.models import ApiKey, Club
from clubwire.web import context
from clubwire.web.ui import base, urls
from clubwire.web.ui.base import Posted, Staff


class KeyForm(base.FormFields):
    """What the Create an API key form sends (and shows again when it has errors)."""

    name: str = ""
    scope: list[str] = Field(default_factory=list)
    expires_in: str = keys.NEVER


# The service's refusal goes beside the name: the scopes and the expiry are checked before it
# is called, and the name is the only thing left for it to refuse.
ERROR_FIELDS: base.ErrorFields = {errors.InvalidInput: "name"}

# The form's choices of when a new key expires, in words: "Never", "In 30 days", …
EXPIRY_LABELS = {
    choice: "Never" if lifetime is None else f"In {lifetime.days} days"
    for choice, lifetime in keys.EXPIRIES.items()
}


def router() -> APIRouter:
    api = base.router()
    api.add_api_route(urls.SETTINGS, club_list, methods=["GET"])
    api.add_api_route(urls.CLUB, club_home, methods=["GET"])
    api.add_api_route(urls.API_KEYS, keys_tab, methods=["GET"])
    api.add_api_route(urls.API_KEYS, create_key, methods=["POST"])
    api.add_api_route(urls.KEY_REVOKE, revoke_form, methods=["GET"])
    api.add_api_route(urls.KEY_REVOKE, revoke_key, methods=["POST"])
    return api


def club_list(request: Request, staff: Staff) -> Response:
    """The clubs this user manages; straight to the club when there is just one."""
    with context.transaction(request) as session:
        managed = users.managed_clubs(session, staff.user)
    if len(managed) == 1:
        return base.redirect(urls.webhooks_url(managed[0]))
    return base.page(request, "clubs.html", clubs=managed)


def club_home(request: Request, staff: Staff, slug: str) -> Response:
    with context.transaction(request) as session:
        club = users.managed_club(session, staff.user, slug)
    return base.redirect(urls.webhooks_url(club))


def keys_tab(request: Request, staff: Staff, slug: str) -> Response:
    with context.transaction(request) as session:
        return _keys_page(request, session, base.club_for(session, staff, slug))


def create_key(
    request: Request, staff: Posted, slug: str, form: Annotated[KeyForm, Form()]
) -> Response:
    """A new key, shown once on the tab the answer goes back to (in a flash, sealed)."""

    def step(session: Session, club: Club) -> Response:
        now = context.now(request)
        created, full_key = keys.create_key(
            session, club, form.scope, form.name, now, form.expires_in
        )
        said = f"API key {created.prefix} created."
        base.flash(request, session, staff, flashes.Flash("key-created", said, secret=full_key))
        return base.redirect(urls.api_keys_url(club))

    found = form.unstorable() or base.field_errors(
        scopes=lambda: _check_scopes(form.scope), expires_in=lambda: keys.expiry(form.expires_in)
    )
    again = partial(_keys_page, typed=form)
    return base.form_step(request, staff, slug, found, step, ERROR_FIELDS, again)


def _check_scopes(chosen: list[str]) -> None:
    try:
        scopes.normalise(chosen)
    except scopes.UnknownScope as exc:
        raise errors.InvalidInput(str(exc)) from None


def _keys_page(
    request: Request,
    session: Session,
    club: Club,
    found: dict[str, str] | None = None,
    *,
    typed: KeyForm | None = None,
) -> Response:
    """The tab; ``found`` and ``typed``: the Create form again, with its errors."""
    listed = keys.list_keys(session, club.id)
    now = context.now(request)
    return base.page(
        request,
        "api_keys.html",
        422 if found else 200,
        club=club,
        keys=listed,
        statuses={key.id: keys.status(key, now) for key in listed},
        expiries=EXPIRY_LABELS,
        typed=typed or KeyForm(scope=[scopes.READ_PROGRAMS]),
        errors=found or {},
    )


def revoke_form(request: Request, staff: Staff, slug: str, prefix: str) -> Response:
    """Are you sure? (The same question without JavaScript as with it.)"""
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        key = _key(session, club, prefix)
    return base.page(request, "key_revoke.html", club=club, key=key)


def revoke_key(request: Request, staff: Posted, slug: str, prefix: str) -> Response:
    with context.transaction(request) as session:
        club = base.club_for(session, staff, slug)
        keys.revoke_key(session, club.id, prefix, context.now(request))
        said = f"API key {prefix} revoked: the API refuses it from now on."
        base.flash(request, session, staff, flashes.Flash("key-revoked", said))
    return base.redirect(urls.api_keys_url(club, prefix))


def _key(session: Session, club: Club, prefix: str) -> ApiKey:
    for key in keys.list_keys(session, club.id):
        if key.prefix == prefix:
            return key
    raise errors.NotFound(f"This club has no API key with the prefix {prefix!r}.")
