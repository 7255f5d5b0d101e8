"""The delivery engine's attempt step: one attempt of one delivery, for the worker and for
Send test. Sign the stored bytes afresh, send them, and tell (a log line and the metrics);
``attempter`` builds the :class:`Attempter` from the settings."""

from __future__ import annotations

import functools
import random
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

from clubwire import logs, signing, tracing
from clubwire.domain import (
    custom_headers,
    delivering,
    event_catalog,
    ordering,
    retry_after,
    standard_signing,
    timestamps,
)
from clubwire.domain.custom_headers import Header
from clubwire.domain.delivering import Job, Result, RetrySchedule
from clubwire.domain.sealing import Sealer
from clubwire.services.delivery.outbound import Sender
from clubwire.services.metrics import Metrics
from clubwire.settings import Settings

USER_AGENT = "Service-Webhooks/1.0"


def headers(
    job: Job,
    secret: str,
    timestamp: int,
    own: Sequence[Header] = (),
    traced: Mapping[str, str] = tracing.NO_HEADERS,
) -> dict[str, str]:
    """The headers of SPEC §5.3, whose signature covers ``<timestamp>.<body>``, and Standard
    Webhooks' beside them, over the same timestamp, after the endpoint's headers of its own
    (``own``), which never replace ours. Their ``webhook-id`` is the event id, read from the
    body's first bytes (a body that is not an envelope falls back to the delivery id, as
    stable across attempts), so no attempt waits on a query for it. A delivery in order sent
    after an earlier one of its key died says which (``ordering.MISSED_HEADER``). With
    tracing on, ``traced`` is the attempt's ``traceparent`` (and ``tracestate``)."""
    message_id = event_catalog.id_of(job.body) or job.delivery_id
    missed = {} if job.missed is None else {ordering.MISSED_HEADER: str(job.missed)}
    ours = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Service-Event": job.kind,
        "X-Service-Delivery": job.delivery_id,
        **missed,
        **traced,
        signing.HEADER: signing.sign(secret, timestamp, job.body),
        **standard_signing.headers(secret, message_id, timestamp, job.body),
    }
    return custom_headers.beside(ours, own) if own else ours


class Attempter:
    """Sends jobs; opened secrets and headers of an endpoint's own are kept in memory by their
    sealed form (a rotation or a change seals anew, so what is new is used from the next
    attempt on). A receiver's ``Retry-After`` may put a retry off by at most ``most_asked``
    from the attempt's end."""

    def __init__(
        self,
        sender: Sender,
        sealer: Sealer,
        clock: Callable[[], datetime],
        schedule: RetrySchedule,
        metrics: Metrics,
        most_asked: timedelta,
    ) -> None:
        self._sender = sender
        self._clock = clock
        self._open = functools.lru_cache(maxsize=4096)(sealer.open)
        self._open_headers = functools.lru_cache(maxsize=4096)(
            lambda sealed: custom_headers.loads(sealer.open(sealed))
        )
        self._schedule = schedule
        self._metrics = metrics
        self._most_asked = most_asked

    async def attempt(self, job: Job) -> Result:
        """The attempt, in a span of its event's trace when tracing is on."""
        started = self._clock()
        with tracing.attempting(job, started) as span:
            result = await self._attempt(job, started, span)
            outcome = delivering.outcome(result.verdict, result.ok)
            span.judged(outcome)
            self._tell(result, outcome)
        return result

    async def _attempt(self, job: Job, started: datetime, span: tracing.Attempted) -> Result:
        secret = self._open(job.secret_sealed)
        own = () if job.headers_sealed is None else self._open_headers(job.headers_sealed)
        sent = headers(job, secret, int(started.timestamp()), own, span.post_headers(job.url))
        answer = await self._sender.post(job.url, job.body, sent)
        span.answered(answer.status, answer.error, answer.location)
        ended = self._clock()
        verdict = delivering.judge(
            job,
            answer.ok,
            ended,
            self._schedule,
            random.random(),
            code=answer.status,
            asked=retry_after.asked(answer.retry_after, ended, self._most_asked),
        )
        return Result(
            job=job,
            started_at=started,
            ok=answer.ok,
            response_code=answer.status,
            error=answer.error,
            duration_ms=answer.duration_ms,
            excerpt=answer.excerpt,
            verdict=verdict,
            retry_after=answer.retry_after,
            location=answer.location,
            trace=span.context,
        )

    def _tell(self, result: Result, outcome: delivering.Outcome) -> None:
        """The attempt's log line and metrics. The line leaves out what the receiver wrote
        (the location of its redirect, a ``Retry-After`` not of the standard's shape): it
        may echo a member's name or email (``logs.unquoted``)."""
        job = result.job
        steered = delivering.steered(result)
        self._metrics.count_attempt(outcome, job.trigger, result.duration_ms / 1000, steered)
        if not logs.enabled():
            return
        logs.event(
            "attempt",
            {
                "delivery_id": job.delivery_id,
                "event_id": event_catalog.id_of(job.body),
                "endpoint_id": job.endpoint_id,
                "club_id": job.club_id,
                "trigger": job.trigger,
                "attempt": job.attempts_made + 1,
                "outcome": outcome,
                "response_code": result.response_code,
                "error": logs.unquoted(result.error, result.location),
                "duration_ms": result.duration_ms,
                "retry_after": _told(result.retry_after),
                "steered": steered,
            },
        )


def _told(asked: str | None) -> str | None:
    """A ``Retry-After`` as the attempt line tells it: as it came when it has the standard's
    shape (seconds or a date), else left out."""
    if asked is None or retry_after.readable(asked):
        return asked
    return logs.unquoted(asked, asked)


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
            timedelta(seconds=settings.retry_after_max),
        )
