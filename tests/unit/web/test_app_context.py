"""The typed application context: one accessor, which refuses a request of an app that has
not started rather than handing out something else, and who is signed in, per request."""

from __future__ import annotations

import pytest
from starlette.requests import Request
from starlette.types import Scope

from clubwire.services.staff.web_sessions import SignedIn
from clubwire.storage.models import User
from clubwire.web import context


def _request(state: dict[str, object] | None = None) -> Request:
    scope: Scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    if state is not None:
        scope["state"] = state
    return Request(scope)


@pytest.mark.parametrize("state", [None, {}, {context.KEY: {"settings": "untyped"}}])
def test_an_app_that_has_not_started_has_no_context(state: dict[str, object] | None) -> None:
    with pytest.raises(TypeError, match="has not started"):
        context.of(_request(state))


def test_who_is_signed_in_is_kept_per_request() -> None:
    staff = SignedIn(User(email="admin@granite.example"), "csrf", "hash")
    signed_in, other = _request({}), _request({})
    assert context.staff(signed_in) is None
    context.remember_staff(signed_in, staff)
    assert context.staff(signed_in) is staff
    assert context.staff(other) is None
