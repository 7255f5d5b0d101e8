"""For operators: ``/healthz`` (the process is up), ``/readyz`` (it can serve: the database is
available and its schema at head), no credential needed; and ``/metrics`` (Prometheus) on this
port only behind ``CLUBWIRE_METRICS_TOKEN``. Without the token it is not served here (404, as
any unknown path): ``clubwire serve --metrics-port`` serves it on a port of its own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import SecretStr
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from clubwire.services import metrics
from clubwire.settings import Settings
from clubwire.storage import migrate
from clubwire.web import bearer, context

HEALTHY = b'{"status":"ok"}'
READY = b'{"status":"ready"}'
METRICS_TOKEN = "CLUBWIRE_METRICS_TOKEN"  # noqa: S105 (a setting's name)


async def healthz(_request: Request) -> Response:
    return Response(HEALTHY, media_type="application/json")


async def readyz(request: Request) -> Response:
    """200 when the database answers and its schema is at head; else 503 saying which (an
    unavailable database is answered as on every route, ``problems.answer``)."""
    await run_in_threadpool(migrate.require_head, context.of(request).engine)
    return Response(READY, media_type="application/json")


def metrics_behind(token: SecretStr) -> Callable[[Request], Awaitable[Response]]:
    """``/metrics`` for a caller holding ``token`` (else 401, problem+json)."""

    async def metrics_text(request: Request) -> Response:
        authorization = request.headers.get("authorization")
        bearer.require(authorization, token, "metrics token", METRICS_TOKEN)
        body = await run_in_threadpool(context.of(request).metrics.exposition)
        return Response(body, media_type=metrics.CONTENT_TYPE)

    return metrics_text


def routes(settings: Settings) -> list[BaseRoute]:
    found: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
    if settings.metrics_token is not None:
        found.append(Route("/metrics", metrics_behind(settings.metrics_token), methods=["GET"]))
    return found
