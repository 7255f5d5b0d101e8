"""What handlers read of the running service, built once at start-up (``app.create_app``'s
lifespan) as one typed ``AppContext`` and read through ``of`` (``of_scope`` on the raw ASGI
path), with the two helpers every handler uses, ``transaction`` and ``now``; and the one
per-request value, who is signed in, through ``staff``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Concatenate, ParamSpec, TypeVar

import jinja2
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import HTTPConnection
from starlette.types import Scope

from clubwire.services.club_api.api_access import ApiAccess
from clubwire.services.club_api.rate_limits import ApiLimits
from clubwire.services.metrics import Metrics
from clubwire.services.staff.web_sessions import SignedIn
from clubwire.settings import Settings
from clubwire.storage import database

T = TypeVar("T")
P = ParamSpec("P")

KEY = "context"  # its name in the lifespan state, which Starlette copies into each request
STAFF = "staff"  # the signed-in staff member, in a request's own state


@dataclass(frozen=True, slots=True)
class AppContext:
    """The service's parts, for its lifetime: the database (``engine``, ``sessions``), the
    configuration, the clock, the API's key reader and rate limits, metrics and the settings
    area's templates."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    clock: Callable[[], datetime]
    access: ApiAccess
    limits: ApiLimits
    metrics: Metrics
    templates: jinja2.Environment  # the settings area's (web.ui.templating)

    def state(self) -> dict[str, AppContext]:
        """What the lifespan yields, so that every request carries this context."""
        return {KEY: self}

    def now(self) -> datetime:
        return self.clock()


def of_scope(scope: Scope) -> AppContext:
    """The context of the app serving ``scope`` (an error if the app has not started)."""
    found = scope.get("state", {}).get(KEY)
    if not isinstance(found, AppContext):
        raise TypeError("the app has not started: its lifespan set no context")
    return found


def of(request: HTTPConnection) -> AppContext:
    return of_scope(request.scope)


@contextmanager
def transaction(request: HTTPConnection) -> Iterator[Session]:
    """One transaction: committed when the block ends, rolled back if it raises."""
    with of(request).sessions.begin() as session:
        yield session


def transact(
    request: HTTPConnection,
    work: Callable[Concatenate[Session, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """``work(session, *args, **kwargs)`` in one transaction, run again if it lost a race
    with another (``database.transact``): for writes that requests and workers contend for."""
    return database.transact(of(request).sessions, work, *args, **kwargs)


def now(request: HTTPConnection) -> datetime:
    return of(request).now()


def staff(request: HTTPConnection) -> SignedIn | None:
    """Who is signed in, once ``remember_staff`` has been told for this request."""
    found = getattr(request.state, STAFF, None)
    return found if isinstance(found, SignedIn) else None


def remember_staff(request: HTTPConnection, signed_in: SignedIn) -> None:
    setattr(request.state, STAFF, signed_in)
