"""Running the HTTP service under uvicorn (httptools + uvloop)."""

from __future__ import annotations

import gc

import uvicorn

from clubwire.settings import Settings
from clubwire.web.app import create_app


def run(settings: Settings, host: str, port: int) -> None:
    """Serve until interrupted; on SQLite a webhook worker runs in this process too.

    Access logs are off: clubwire writes its own, without secrets.
    """
    config = uvicorn.Config(
        create_app(settings, run_worker=settings.is_sqlite),
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="info",
        server_header=False,
    )
    # Everything long-lived exists by now: keep it out of the collector's way, so that full
    # collections under load stay short (they took 50-60 ms before; bench/api.py).
    gc.collect()
    gc.freeze()
    uvicorn.Server(config).run()
