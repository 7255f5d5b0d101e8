"""``clubwire migrate``, ``serve`` and ``worker``."""

from __future__ import annotations

import asyncio
import gc
import signal

import click
import uvloop

from clubwire import interrupts, logs
from clubwire.cli.base import cli, session_factory, settings
from clubwire.services import secret_keys
from clubwire.settings import Settings
from clubwire.storage import database, migrate

PORT = click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
HOST = click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
WORKER_GC_THRESHOLD = 20_000  # young-generation collections every 20,000 allocations, not 700


@cli.command("migrate")
def migrate_command() -> None:
    """Upgrade the database schema to the newest version."""
    engine = database.engine_for(settings())
    try:
        migrate.upgrade(engine)
        click.echo(f"Database schema is at revision {migrate.current(engine)}.")
    finally:
        engine.dispose()


@cli.command()
@HOST
@PORT
def serve(host: str, port: int) -> None:
    """Serve the HTTP API; on SQLite also deliver webhooks in this process."""
    from clubwire import server

    current = settings()
    _ready(current)
    server.run(current, host, port)


@cli.command()
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    help="Serve /metrics and /healthz on this port (default: CLUBWIRE_WORKER_METRICS_PORT; "
    "unset: none).",
)
@click.option(
    "--metrics-host",
    help="Address for --metrics-port (default: CLUBWIRE_WORKER_METRICS_HOST, 127.0.0.1).",
)
def worker(metrics_port: int | None, metrics_host: str | None) -> None:
    """Deliver webhooks until stopped (SIGTERM or Ctrl-C finish the attempts in flight; a
    second Ctrl-C stops at once)."""
    from clubwire.worker import lock

    current = _with_metrics_address(settings(), metrics_port, metrics_host)
    _ready(current)
    logs.configure(current.log_level)
    with lock.single_worker(current):
        gc.collect()
        gc.freeze()  # as in serve: full collections then skip the start-up heap
        # Each attempt allocates many short-lived objects: fewer, larger young collections
        # cost about 7 % less of the worker's CPU per delivery (ADR 0004).
        gc.set_threshold(WORKER_GC_THRESHOLD, 10, 10)
        uvloop.run(_work(current))


def _ready(current: Settings) -> None:
    """The schema current (on SQLite: migrated) and the secret key checked, before the server
    or the worker starts and logs: a refusal is one line, not a log and a traceback."""
    with session_factory(current) as sessions:
        secret_keys.check(sessions, current)


def _interrupted(stop: asyncio.Event) -> None:
    """Ctrl-C: the first stops gracefully, a second at once."""
    if stop.is_set():
        interrupts.stop_at_once()
    stop.set()


def _with_metrics_address(current: Settings, port: int | None, host: str | None) -> Settings:
    given = {"worker_metrics_port": port, "worker_metrics_host": host}
    return current.model_copy(update={name: v for name, v in given.items() if v is not None})


async def _work(current: Settings) -> None:
    from clubwire.services.metrics import Metrics
    from clubwire.worker import exposition, running

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, _interrupted, stop)
    metrics = Metrics()
    with session_factory(current, worker=True) as sessions, metrics.watching_queue(sessions):
        async with (
            running.running(current, sessions, metrics=metrics),
            exposition.serving(current, metrics),
        ):
            click.echo("clubwire worker: delivering webhooks; Ctrl-C stops.", err=True)
            await stop.wait()
