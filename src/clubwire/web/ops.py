"""For operators: ``/healthz`` (the process is up), ``/readyz`` (it can serve: the database is
reachable and its schema at head) and ``/metrics`` (Prometheus). No authentication."""

from __future__ import annotations

import sqlalchemy.exc
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from clubwire import errors
from clubwire.services import metrics
from clubwire.storage import migrate

HEALTHY = b'{"status":"ok"}'
READY = b'{"status":"ready"}'


async def healthz(_request: Request) -> Response:
    return Response(HEALTHY, media_type="application/json")


async def readyz(request: Request) -> Response:
    """200 when the database answers and its schema is at head; else 503 saying which."""
    await run_in_threadpool(require_ready, request.state.engine)
    return Response(READY, media_type="application/json")


async def metrics_text(request: Request) -> Response:
    registry: metrics.Metrics = request.state.metrics
    return Response(await run_in_threadpool(registry.exposition), media_type=metrics.CONTENT_TYPE)


def require_ready(engine: Engine) -> None:
    """Raise unless the database answers and its schema is at head, saying which."""
    try:
        migrate.require_head(engine)
    except sqlalchemy.exc.DBAPIError as exc:
        reason = type(exc.orig).__name__ if exc.orig is not None else type(exc).__name__
        raise errors.DatabaseUnreachable(f"The database cannot be reached ({reason}).") from exc


def routes() -> list[BaseRoute]:
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_text, methods=["GET"]),
    ]
