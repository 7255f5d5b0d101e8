"""``clubwire demo``: the whole product in one process, on the embedded SQLite database.

A demo club with programs, staff sign-ins and a key; a local HTTPS receiver and an endpoint
that points at it; and realistic events published every few seconds, which the in-process
worker delivers. The receiver fails now and then, so retries show in the settings page.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import shlex
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click
import sqlalchemy.exc
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors, receiving
from clubwire.cli.base import cli, settings, transaction
from clubwire.cli.serving import HOST, PORT
from clubwire.domain import replay_window, timestamps
from clubwire.services import clubs, demo
from clubwire.settings import Settings

if TYPE_CHECKING:
    from clubwire.web.app import Service

log = logging.getLogger(__name__)

LAST_DELIVERY = Path("demo", "last-delivery")  # in the settings' home folder
RETRY_SCHEDULE = (10, 30, 60, 300, 900)  # so that retries show within a minute
REPLAY_WINDOW = timedelta(hours=1)
INTERVAL_SECONDS = (2.0, 5.0)
FAILURE_RATE = 1 / 6
SLOW_RATE = 1 / 10
SLOW_SECONDS = (2.0, 4.0)


@cli.command("demo")
@HOST
@PORT
# Seconds between events, for tests; by default 2 to 5, at random.
@click.option("--interval", type=click.FloatRange(min=0.01), default=None, hidden=True)
def serve_demo(host: str, port: int, interval: float | None) -> None:
    """Serve a demo club, with club events every few seconds and a local receiver for them."""
    from clubwire import server

    current, tls = _settings(host, port)
    with contextlib.closing(receiving.bind("127.0.0.1", 0)) as listening:
        receiver_url = receiving.url_of(listening, demo.RECEIVER_PATH)
        with transaction(current) as session:
            now = timestamps.utc_now()
            seeded = demo.seed(session, now)
            demo.seed_staff(session, now)
            secret = demo.seed_endpoint(session, now, current, receiver_url)
            tour = _replay_tour(session, seeded.slug, now)
        kept = current.home / LAST_DELIVERY
        receiving.keep_node_check(kept.parent)
        _introduce(current, seeded, receiver_url, secret, kept, tour)
        receiver = receiving.Receiver(secret, _reporter(kept), _flaky(random.Random()))
        service = _service(receiver, tls, listening, interval)
        server.run(current, host, port, [service], role="demo")
    click.echo("clubwire demo: stopped.")


def _settings(host: str, port: int) -> tuple[Settings, receiving.Authority]:
    """The settings for the demo (its URL, its receiver's CA, quick retries), and that CA."""
    current = settings()
    if not current.is_sqlite:
        raise errors.ConfigurationError(
            "clubwire demo runs on the embedded SQLite database: unset CLUBWIRE_DATABASE_URL."
        )
    tls = receiving.authority(current.home / receiving.TLS_FOLDER)
    update: dict[str, object] = {
        "public_url": f"http://{host}:{port}",
        "ca_bundle": tls.bundle,
        "allow_private_targets": True,
    }
    if "retry_schedule" not in current.model_fields_set:  # CLUBWIRE_RETRY_SCHEDULE still wins
        update["retry_schedule"] = RETRY_SCHEDULE
    if "log_level" not in current.model_fields_set:  # the terminal is for what the demo prints
        update["log_level"] = "warning"
    return current.model_copy(update=update), tls


def _introduce(
    current: Settings,
    seeded: demo.Seeded,
    receiver_url: str,
    secret: str,
    kept: Path,
    tour: str,
) -> None:
    base_url = current.club_base_url(seeded.slug)
    staff = "".join(
        f"  {'superadmin' if s.superadmin else 'club admin'}  {s.email}  password {s.password}\n"
        for s in demo.SIGN_INS
    )
    click.echo(
        f"\nclubwire demo: club {seeded.slug!r} with {seeded.program_count} programs, "
        "Webhooks & API on.\n\n"
        f"Settings page: {current.public_url}/settings/{seeded.slug}/webhooks  (sign in as)\n"
        f"{staff}\n"
        f"API key (shown once; the previous demo key is revoked): {seeded.key}\n"
        f"  curl -s -H 'Authorization: Bearer {seeded.key}' {base_url}/api/v1/programs\n"
        f"API document: {base_url}/api/v1/openapi.json\n\n"
        f"Webhooks: a demo event every few seconds goes to the demo's receiver at {receiver_url}.\n"
        "It answers 503 to about one delivery in six and is sometimes slow, so retries show.\n"
        "Each delivery it receives is printed below, one line each (receiver ✓ …); the latest\n"
        f"verified one is kept in {kept}. Check it yourself with Node.js, using the example\n"
        "of docs/receiving-webhooks.md written beside it (the signing secret is new each run):\n"
        f"  WEBHOOK_SECRET={secret} node {_quoted(kept.parent / receiving.NODE_CHECK)} "
        f"{_quoted(kept)}\n\n"
        f"{tour}"
        "Ctrl-C stops.\n"
    )


def _replay_tour(session: Session, slug: str, now: datetime) -> str:
    """The tour's replay step: a command for another terminal, which runs as printed (the
    same program, from the same folder), counting this run's first hour of deliveries."""
    club = clubs.get_club(session, slug)
    endpoint = demo.receiver_endpoint(session, club)
    assert endpoint is not None  # seeded just before
    since = now.replace(second=0, microsecond=0)
    window = ["--since", replay_window.to_minute(since)]
    window += ["--until", replay_window.to_minute(since + REPLAY_WINDOW)]
    statuses = ["--status", "dead", "--status", "succeeded"]
    args = ["delivery", "replay", slug, "--endpoint", endpoint.id, *window, *statuses]
    return (
        "Replay sends the deliveries of a time range again, each as Retry does. Count this\n"
        "run's first hour of them (dead and succeeded), then run it without --dry-run to send\n"
        "them (or press Replay… on the endpoint, in the settings page):\n"
        f"  {shlex.join([*_this_program(), *args, '--dry-run'])}\n\n"
    )


def _this_program() -> list[str]:
    """How this program was started: its script (``.venv/bin/clubwire``), or Python's
    ``-m clubwire``."""
    script = sys.argv[0]
    if Path(script).name == "clubwire":
        return [script]
    return [sys.executable, "-m", "clubwire"]


def _quoted(path: Path) -> str:
    """``path`` as a shell reads it, so that the printed command runs as printed."""
    return shlex.quote(str(path))


def _reporter(kept: Path) -> Callable[[receiving.Arrival], None]:
    """Prints each arrival, and keeps the latest verified one in ``kept``."""

    def report(arrival: receiving.Arrival) -> None:
        click.echo(f"receiver {arrival.summary()}")
        if arrival.problem is None and arrival.signature is not None:
            receiving.keep(kept, arrival.body, arrival.signature)

    return report


def _flaky(rng: random.Random) -> Callable[[], receiving.Answer]:
    """503 to about one delivery in six, and now and then a slow 200."""

    def answer() -> receiving.Answer:
        roll = rng.random()
        if roll < FAILURE_RATE:
            return receiving.Answer(503)
        if roll < FAILURE_RATE + SLOW_RATE:
            return receiving.Answer(200, rng.uniform(*SLOW_SECONDS))
        return receiving.Answer()

    return answer


def _service(
    receiver: receiving.Receiver,
    tls: receiving.Authority,
    listening: socket.socket,
    interval: float | None,
) -> Service:
    """The receiver and the publisher, inside the server's event loop."""

    @asynccontextmanager
    async def run(sessions: sessionmaker[Session]) -> AsyncIterator[None]:
        async with receiving.serving(receiver, tls, listening), _publishing(sessions, interval):
            yield

    return run


@asynccontextmanager
async def _publishing(
    sessions: sessionmaker[Session], interval: float | None
) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(_publish_until(stop, sessions, interval))
    try:
        yield
    finally:
        stop.set()
        await task


async def _publish_until(
    stop: asyncio.Event, sessions: sessionmaker[Session], interval: float | None
) -> None:
    rng = random.Random()
    while not await _stopped(stop, interval or rng.uniform(*INTERVAL_SECONDS)):
        await asyncio.to_thread(_publish_one, sessions, rng)


async def _stopped(stop: asyncio.Event, seconds: float) -> bool:
    """Wait for ``stop`` at most ``seconds``; whether it is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()


def _publish_one(sessions: sessionmaker[Session], rng: random.Random) -> None:
    try:
        with sessions.begin() as session:
            demo.publish_random(session, timestamps.utc_now(), rng)
    except sqlalchemy.exc.OperationalError as exc:  # the database stayed busy: try the next one
        log.warning("clubwire demo: an event was not published: %s", exc.orig)
