"""Putting a worker together: as its own process, inside ``serve`` on SQLite, or for a test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import jobs, timestamps
from clubwire.domain.retry import RetrySchedule
from clubwire.domain.sealing import Sealer
from clubwire.services import claims, clubs, records, secret_keys
from clubwire.services.metrics import Metrics
from clubwire.settings import Settings
from clubwire.worker import loop, retention
from clubwire.worker.attempts import Attempter
from clubwire.worker.client import Sender


@asynccontextmanager
async def attempter(
    settings: Settings,
    clock: Callable[[], datetime] = timestamps.utc_now,
    metrics: Metrics | None = None,
) -> AsyncIterator[Attempter]:
    """Attempts counted in ``metrics`` (else in metrics no one reads)."""
    async with Sender(settings) as sender:
        yield Attempter(
            sender,
            Sealer(settings.secret_key_value()),
            clock,
            RetrySchedule(settings.retry_schedule),
            metrics or Metrics(),
        )


@asynccontextmanager
async def running(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Callable[[], datetime] = timestamps.utc_now,
    metrics: Metrics | None = None,
) -> AsyncIterator[loop.Worker]:
    """A worker delivering in this event loop, and pruning old history, until the block
    ends (then it stops gracefully). Refused before it claims anything when its secret key
    cannot open the stored secrets (it could sign none of them)."""
    await asyncio.to_thread(secret_keys.check, sessions, settings)
    async with attempter(settings, clock, metrics) as sends:
        worker = loop.Worker(settings, sessions, sends, clock)
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(worker.run(stop)),
            asyncio.create_task(retention.keep_pruning(settings, sessions, clock, stop)),
        ]
        try:
            yield worker
        finally:
            stop.set()
            await asyncio.gather(*tasks)


async def send_test(
    settings: Settings,
    sessions: sessionmaker[Session],
    sends: Attempter,
    club_id: str,
    endpoint_id: str,
    clock: Callable[[], datetime] = timestamps.utc_now,
) -> jobs.Result:
    """Send test: a ``ping`` to one endpoint, one attempt, recorded, its result returned
    (refused first when the secret key cannot open the stored secrets)."""
    lease = timedelta(seconds=settings.lease_seconds)

    def create() -> jobs.Job:
        with sessions.begin() as session:
            club = clubs.get_club_by_id(session, club_id)
            return claims.create_test_job(session, club, endpoint_id, clock(), lease)

    def record(result: jobs.Result) -> None:
        schedule = RetrySchedule(settings.retry_schedule)
        for refused in records.record_batch(sessions, [result], schedule, clock()):
            loop.tell_refused(refused)

    await asyncio.to_thread(secret_keys.check, sessions, settings)
    result = await sends.attempt(await asyncio.to_thread(create))
    await asyncio.to_thread(record, result)
    return result
