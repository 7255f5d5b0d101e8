"""Send test: a ``ping`` to one endpoint, through the delivery engine's own steps: its job
made by ``claims.create_test_job``, one attempt by the ``attempts`` step, recorded by
``records.record_batch``. The settings area's button and ``clubwire endpoint test`` call it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import jobs, timestamps
from clubwire.domain.retry import RetrySchedule
from clubwire.services import claims, clubs, records, secret_keys
from clubwire.services.attempts import Attempter
from clubwire.settings import Settings


async def send_test(
    settings: Settings,
    sessions: sessionmaker[Session],
    attempter: Attempter,
    club_id: str,
    endpoint_id: str,
    clock: Callable[[], datetime] = timestamps.utc_now,
) -> jobs.Result:
    """A ``ping`` to one endpoint, one attempt, recorded, its result returned (refused first
    when the secret key cannot open the stored secrets)."""
    lease = timedelta(seconds=settings.lease_seconds)

    def create() -> jobs.Job:
        with sessions.begin() as session:
            club = clubs.get_club_by_id(session, club_id)
            return claims.create_test_job(session, club, endpoint_id, clock(), lease)

    def record(result: jobs.Result) -> None:
        schedule = RetrySchedule(settings.retry_schedule)
        for refused in records.record_batch(sessions, [result], schedule, clock()):
            records.tell_refused(refused)

    await asyncio.to_thread(secret_keys.check, sessions, settings)
    result = await attempter.attempt(await asyncio.to_thread(create))
    await asyncio.to_thread(record, result)
    return result
