"""``create_app(settings)``: the whole HTTP service, built explicitly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from datetime import datetime

from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker
from starlette.routing import BaseRoute, Host, Router

import clubwire
from clubwire import errors
from clubwire.domain import timestamps
from clubwire.services import secret_keys
from clubwire.services.club_api.api_access import ApiAccess
from clubwire.services.club_api.rate_limits import ApiLimits, RateCounter
from clubwire.services.metrics import Metrics
from clubwire.settings import Settings
from clubwire.storage import database, fastpath, migrate
from clubwire.web import (
    body_limit,
    context,
    internal_api,
    openapi,
    ops,
    problems,
    public_api,
    telemetry,
    ui,
    unstorable,
)
from clubwire.web.ui import templating
from clubwire.worker import exposition, lock, running

log = logging.getLogger(__name__)

# Runs beside the app for its lifetime, given the app's sessions (the demo's receiver, say).
Service = Callable[[sessionmaker[Session]], AbstractAsyncContextManager[object]]

DESCRIPTION = """\
clubwire: a club's read-only data API and signed outbound webhooks.

* **Club data API** at each club's base URL, `{base_url}/api/v1`, behind the club's API keys.
* **Internal API** at `/internal/v1`, for the host platform, behind `CLUBWIRE_PLATFORM_TOKEN`.
"""


def create_app(
    settings: Settings,
    clock: Callable[[], datetime] = timestamps.utc_now,
    run_worker: bool = False,
    services: Sequence[Service] = (),
) -> FastAPI:
    """The service; its database must be migrated (``clubwire migrate``) before it starts.

    With ``run_worker`` a webhook worker delivers in the same process (``serve`` on SQLite).
    ``services`` start before that worker and stop after it.
    """
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[dict[str, context.AppContext]]:
        async with AsyncExitStack() as stack:
            engine = database.engine_for(settings)
            stack.callback(engine.dispose)
            migrate.require_head(engine)
            sessions = database.sessions(engine)
            secret_keys.check(sessions, settings)
            stack.enter_context(metrics.watching_queue(sessions, clock))
            port, host = settings.serve_metrics_port, settings.serve_metrics_host
            await stack.enter_async_context(exposition.serving(host, port, metrics))
            kept = settings.api_kept_keys
            reader = await fastpath.open_reader(settings.sqlalchemy_url, sessions, kept)
            access = ApiAccess(reader, sessions, clock, settings.api_kept_listings, kept)
            stack.push_async_callback(access.close)
            limits = await stack.enter_async_context(_api_limits(settings, sessions))
            for service in services:
                await stack.enter_async_context(service(sessions))
            if run_worker:
                await _start_worker(stack, settings, sessions, clock, metrics)
            templates = templating.environment()
            yield context.AppContext(
                settings, engine, sessions, clock, access, limits, metrics, templates
            ).state()

    app = FastAPI(
        title="clubwire",
        version=clubwire.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
        # FastAPI's own OpenTelemetry spans stay off whatever sets a global provider: they
        # record query strings and continue any caller's trace (clubwire.tracing, ADR 0018).
        telemetry={"tracing": False, "metrics": False, "logs": False, "auto_configure": False},
    )
    problems.install(app)
    app.add_middleware(unstorable.Refuse)  # NUL in a path, query or Host: 422
    app.include_router(internal_api.router())
    ui.install(app)
    app.router.routes.extend(ops.routes(settings))
    app.add_middleware(body_limit.BodyLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(
        telemetry.RequestTelemetry, metrics=metrics, platform_token=settings.platform_token
    )
    app.router.routes[:0] = _public_routes(settings)
    public = public_api.describe()
    app.openapi = lambda: openapi.service_document(app, public, settings)  # type: ignore[method-assign]
    return app


async def _start_worker(
    stack: AsyncExitStack,
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Callable[[], datetime],
    metrics: Metrics,
) -> None:
    """The in-process worker, unless another process holds the SQLite worker lock."""
    try:
        stack.enter_context(lock.single_worker(settings))
    except errors.AlreadyRunning:
        log.warning("another clubwire worker runs on this database: this process only serves")
        return
    await stack.enter_async_context(running.running(settings, sessions, clock, metrics))


@asynccontextmanager
async def _api_limits(
    settings: Settings, sessions: sessionmaker[Session]
) -> AsyncIterator[ApiLimits]:
    """The API's rate limits, their counts shared with the other API processes meanwhile."""
    counter = RateCounter(sessions)
    sharing = asyncio.create_task(counter.keep_sharing())
    try:
        yield ApiLimits(
            counter,
            per_key=settings.api_rate_limit,
            per_club=settings.api_club_rate_limit,
            auth_failures=settings.api_auth_failure_limit,
        )
    finally:
        sharing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sharing


def _public_routes(settings: Settings) -> list[BaseRoute]:
    """The club data API, first in line: by host name with a suffix, else under /clubs/{slug}."""
    if settings.club_host_suffix:
        club_host = "{slug}" + settings.club_host_suffix
        return [Host(club_host, Router(public_api.routes(settings, prefix="")))]
    return public_api.routes(settings, prefix="/clubs/{slug}")
