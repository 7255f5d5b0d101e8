"""Running the HTTP service under uvicorn (httptools + uvloop)."""

from __future__ import annotations

import gc

import uvicorn

from clubwire.settings import Settings
from clubwire.storage import database, migrate
from clubwire.web.app import create_app


def prepare_database(settings: Settings) -> None:
    """Migrate the embedded SQLite database; require PostgreSQL to have been migrated."""
    engine = database.engine_for(settings)
    try:
        if settings.is_sqlite:
            migrate.upgrade(engine)
        else:
            migrate.require_head(engine)
    finally:
        engine.dispose()


def run(settings: Settings, host: str, port: int) -> None:
    """Serve until interrupted. Access logs are off: clubwire writes its own, without secrets."""
    config = uvicorn.Config(
        create_app(settings),
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
