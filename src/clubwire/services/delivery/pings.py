"""Send test: a ``ping`` to one endpoint, through the delivery engine's own steps: its job
made by ``claims.create_test_job``, one attempt by the ``attempts`` step, recorded by
``records.record_batch``. The settings area's button and ``clubwire endpoint test`` call it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import delivering, event_catalog, timestamps
from clubwire.domain.delivering import RetrySchedule, Status
from clubwire.services import clubs, secret_keys
from clubwire.services.delivery import claims, records
from clubwire.services.delivery.attempts import Attempter
from clubwire.settings import Settings
from clubwire.storage.models import Attempt, Delivery


async def send_test(
    settings: Settings,
    sessions: sessionmaker[Session],
    attempter: Attempter,
    club_id: str,
    endpoint_id: str,
    clock: Callable[[], datetime] = timestamps.utc_now,
) -> delivering.Result:
    """A ``ping`` to one endpoint, one attempt, recorded, its result returned (refused first
    when the secret key cannot open the stored secrets)."""
    lease = timedelta(seconds=settings.lease_seconds)

    def create() -> delivering.Job:
        with sessions.begin() as session:
            club = clubs.get_club_by_id(session, club_id)
            return claims.create_test_job(session, club, endpoint_id, clock(), lease)

    def record(result: delivering.Result) -> None:
        schedule = RetrySchedule(settings.retry_schedule)
        for refused in records.record_batch(sessions, [result], schedule, clock()).refused:
            records.tell_refused(refused)

    await asyncio.to_thread(secret_keys.check, sessions, settings)
    result = await attempter.attempt(await asyncio.to_thread(create))
    await asyncio.to_thread(record, result)
    return result


# What a Send test answered 410 says: a delivery answered so switches the endpoint off.
GONE_WORDS = (
    "the receiver answered 410 Gone: it wants no more webhooks, and a delivery answered so "
    "switches the endpoint off; a test switches nothing off"
)


def plain(result: delivering.Result) -> str:
    """A Send test's outcome in plain words, for the settings area and the CLI: as
    ``delivering.plain_attempt`` says any attempt's, but a 410 says what it means."""
    return plain_attempt(result.ok, result.response_code, result.duration_ms, result.error)


def plain_attempt(ok: bool, response_code: int | None, duration_ms: int, error: str | None) -> str:
    """``plain`` of a Send test's attempt as it was stored."""
    if not ok and error is None and response_code == delivering.GONE:
        error = GONE_WORDS
    return delivering.plain_attempt(ok, response_code, duration_ms, error)


@dataclass(frozen=True, slots=True)
class PingOutcome:
    """How a Send test among deliveries reads: ``Test: 200 in 43 ms``, ``Test failed: …``,
    or ``Test: sending`` before its one attempt is recorded."""

    ok: bool | None
    text: str


def outcomes(session: Session, shown: Iterable[Delivery]) -> Mapping[str, PingOutcome]:
    """The outcome of each Send test among ``shown`` (deliveries with their event's kind
    loaded), by delivery id, read from its one attempt in one query."""
    tests = [d for d in shown if d.event.kind == event_catalog.PING]
    if not tests:
        return {}
    ids = [d.id for d in tests]
    found = {
        attempt.delivery_id: attempt
        for attempt in session.scalars(select(Attempt).where(Attempt.delivery_id.in_(ids)))
    }
    return {d.id: _outcome(d, found.get(d.id)) for d in tests}


def _outcome(test: Delivery, attempt: Attempt | None) -> PingOutcome:
    """Read from the test's status, which its one attempt's verdict set (SUCCEEDED or DEAD)."""
    if attempt is None:
        return PingOutcome(None, "Test: sending")
    ok = test.status == Status.SUCCEEDED
    words = plain_attempt(ok, attempt.response_code, attempt.duration_ms, attempt.error)
    return PingOutcome(ok, f"Test: {words}" if ok else f"Test {words}")
