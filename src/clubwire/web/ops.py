"""For operators: ``/healthz`` (the process is up), ``/readyz`` (it can serve: the database is
available and its schema at head) and ``/metrics`` (Prometheus). No authentication."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from clubwire.services import metrics
from clubwire.storage import migrate

HEALTHY = b'{"status":"ok"}'
READY = b'{"status":"ready"}'


async def healthz(_request: Request) -> Response:
    return Response(HEALTHY, media_type="application/json")


async def readyz(request: Request) -> Response:
    """200 when the database answers and its schema is at head; else 503 saying which (an
    unavailable database is answered as on every route, ``problems.answer``)."""
    await run_in_threadpool(migrate.require_head, request.state.engine)
    return Response(READY, media_type="application/json")


async def metrics_text(request: Request) -> Response:
    registry: metrics.Metrics = request.state.metrics
    return Response(await run_in_threadpool(registry.exposition), media_type=metrics.CONTENT_TYPE)


def routes() -> list[BaseRoute]:
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_text, methods=["GET"]),
    ]
