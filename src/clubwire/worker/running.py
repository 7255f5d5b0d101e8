"""Putting a worker together: as its own process, inside ``serve`` on SQLite, or for a test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import timestamps
from clubwire.services import secret_keys
from clubwire.services.delivery import attempts
from clubwire.services.metrics import Metrics
from clubwire.settings import Settings
from clubwire.worker import loop, mail, retention


@asynccontextmanager
async def running(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Callable[[], datetime] = timestamps.utc_now,
    metrics: Metrics | None = None,
) -> AsyncIterator[loop.Worker]:
    """A worker delivering in this event loop, pruning old history and sending the email
    outbox (when email is on), until the block ends (then it stops gracefully). Refused
    before it claims anything when its secret key cannot open the stored secrets (it could
    sign none of them)."""
    await asyncio.to_thread(secret_keys.check, sessions, settings)
    async with attempts.attempter(settings, clock, metrics) as sends:
        worker = loop.Worker(settings, sessions, sends, clock)
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(worker.run(stop)),
            asyncio.create_task(retention.keep_pruning(settings, sessions, clock, stop)),
        ]
        mailer = mail.mailer_for(settings, sessions, clock)
        if mailer is not None:
            tasks.append(asyncio.create_task(mail.keep_sending(mailer, stop)))
        try:
            yield worker
        finally:
            stop.set()
            await asyncio.gather(*tasks)
