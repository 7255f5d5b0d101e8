"""A worker's own small HTTP server for Prometheus: ``/metrics`` and ``/healthz``, in the
worker's event loop (so an answer also shows the loop is not stuck)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from clubwire.services.metrics import CONTENT_TYPE, Metrics
from clubwire.settings import Settings

HEALTHY = b'{"status":"ok"}'


@asynccontextmanager
async def serving(settings: Settings, metrics: Metrics) -> AsyncIterator[None]:
    """Serve ``metrics`` until the block ends, on ``CLUBWIRE_WORKER_METRICS_HOST`` and
    ``…_PORT``; nothing when no port is set."""
    if settings.worker_metrics_port is None:
        yield
        return

    async def metrics_text(_request: web.Request) -> web.Response:
        body = await asyncio.to_thread(metrics.exposition)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(body=HEALTHY, content_type="application/json")

    app = web.Application()
    app.router.add_get("/metrics", metrics_text)
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        host, port = settings.worker_metrics_host, settings.worker_metrics_port
        await web.TCPSite(runner, host, port).start()
        yield
    finally:
        await runner.cleanup()
