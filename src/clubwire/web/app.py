"""``create_app(settings)``: the whole HTTP service, built explicitly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from fastapi import FastAPI
from starlette.routing import BaseRoute, Host, Router

import clubwire
from clubwire.domain import timestamps
from clubwire.services.api_access import ApiAccess
from clubwire.settings import Settings
from clubwire.storage import database, fastpath, migrate
from clubwire.web import internal_api, openapi, problems, public_api

DESCRIPTION = """\
clubwire: a club's read-only data API and signed outbound webhooks.

* **Club data API** at each club's base URL, `{base_url}/api/v1`, behind the club's API keys.
* **Internal API** at `/internal/v1`, for the host platform, behind `CLUBWIRE_PLATFORM_TOKEN`.
"""


def create_app(settings: Settings, clock: Callable[[], datetime] = timestamps.utc_now) -> FastAPI:
    """The service; its database must be migrated (``clubwire migrate``) before it starts."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        engine = database.engine_for(settings)
        migrate.require_head(engine)
        sessions = database.sessions(engine)
        access = ApiAccess(await fastpath.open_reader(settings.sqlalchemy_url), sessions, clock)
        try:
            yield {"sessions": sessions, "access": access, "clock": clock}
        finally:
            await access.close()
            engine.dispose()

    app = FastAPI(
        title="clubwire",
        version=clubwire.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    problems.install(app)
    app.include_router(internal_api.router(settings))
    app.router.routes[:0] = _public_routes(settings)
    public = public_api.describe()
    app.openapi = lambda: openapi.service_document(app, public, settings)  # type: ignore[method-assign]
    return app


def _public_routes(settings: Settings) -> list[BaseRoute]:
    """The club data API, first in line: by host name with a suffix, else under /clubs/{slug}."""
    if settings.club_host_suffix:
        club_host = "{slug}" + settings.club_host_suffix
        return [Host(club_host, Router(public_api.routes(settings, prefix="")))]
    return public_api.routes(settings, prefix="/clubs/{slug}")
