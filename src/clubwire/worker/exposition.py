"""A process's own small HTTP server for Prometheus: ``/metrics`` and ``/healthz``, in the
process's event loop (so an answer also shows the loop is not stuck). A worker's
(``--metrics-port``), and ``clubwire serve``'s when its metrics are kept off the public port."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from clubwire.services.metrics import CONTENT_TYPE, Metrics

HEALTHY = b'{"status":"ok"}'


@asynccontextmanager
async def serving(host: str, port: int | None, metrics: Metrics) -> AsyncIterator[None]:
    """Serve ``metrics`` on ``host`` and ``port`` until the block ends; nothing when ``port``
    is None. No credential is asked: bind it to an address only operators reach."""
    if port is None:
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
        await web.TCPSite(runner, host, port).start()
        yield
    finally:
        await runner.cleanup()
