"""The worker's periodic pruning of old delivery history (``services.retention``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from clubwire import logs
from clubwire.services import retention
from clubwire.settings import Settings
from clubwire.worker import stopping

log = logging.getLogger(__name__)

FIRST_AFTER = 60.0  # seconds after the worker starts
EVERY = 600.0  # seconds between the end of one round and the start of the next


async def keep_pruning(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Callable[[], datetime],
    stop: asyncio.Event,
    first_after: float = FIRST_AFTER,
) -> None:
    """Prune shortly after the start and every ``EVERY`` seconds, until ``stop`` is set
    (a round in progress then ends after its current batch)."""
    period = timedelta(days=settings.retention_days)
    delay = first_after
    while not await stopping.stopped_within(stop, delay):
        delay = EVERY
        try:
            pruned = await asyncio.to_thread(
                retention.prune, sessions, clock(), period, keep_going=lambda: not stop.is_set()
            )
        except Exception:
            log.exception("pruning old delivery history failed; trying again later")
            continue
        if pruned.total:
            logs.event("pruned", {"retention_days": settings.retention_days, **asdict(pruned)})
