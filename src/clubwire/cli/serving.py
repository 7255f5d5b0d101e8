"""``clubwire migrate``, ``serve``, ``worker`` and ``demo``."""

from __future__ import annotations

import asyncio
import gc
import signal

import click
import uvloop

from clubwire.cli.base import cli, prepare_database, session_factory, settings, transaction
from clubwire.domain import timestamps
from clubwire.settings import Settings
from clubwire.storage import database, migrate

PORT = click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
HOST = click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")


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
    prepare_database(current)
    server.run(current, host, port)


@cli.command()
def worker() -> None:
    """Deliver webhooks until stopped (SIGTERM or Ctrl-C finish the attempts in flight)."""
    from clubwire.worker import lock

    current = settings()
    with lock.single_worker(current):
        gc.collect()
        gc.freeze()  # as in serve: full collections then skip the start-up heap
        uvloop.run(_work(current))


async def _work(current: Settings) -> None:
    from clubwire.worker import running

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    with session_factory(current, worker=True) as sessions:
        async with running.running(current, sessions):
            click.echo("clubwire worker: delivering webhooks; Ctrl-C stops.", err=True)
            await stop.wait()


@cli.command()
@HOST
@PORT
def demo(host: str, port: int) -> None:
    """Seed a demo club with programs and a key, print a ready curl, and serve."""
    from clubwire import server
    from clubwire.services import demo as demo_service

    current = settings().model_copy(update={"public_url": f"http://{host}:{port}"})
    with transaction(current) as session:
        seeded = demo_service.seed(session, timestamps.utc_now())
    base_url = current.club_base_url(seeded.slug)
    click.echo(
        f"\nclubwire demo: club {seeded.slug!r} with {seeded.program_count} programs, module on.\n"
        f"API key (shown once): {seeded.key}\n\n"
        f"Try it:\n  curl -s -H 'Authorization: Bearer {seeded.key}' "
        f"{base_url}/api/v1/programs\n\n"
        f"API document: {base_url}/api/v1/openapi.json\nPress Ctrl-C to stop.\n"
    )
    server.run(current, host, port)
