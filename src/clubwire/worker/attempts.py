"""One attempt of one delivery: sign the stored bytes afresh and send them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime

from clubwire import signing
from clubwire.domain.sealing import Sealer
from clubwire.services.dispatch import Job, Result
from clubwire.worker.client import Sender

USER_AGENT = "Service-Webhooks/1.0"


def headers(job: Job, secret: str, timestamp: int) -> dict[str, str]:
    """The headers of SPEC §5.3; the signature covers ``<timestamp>.<body>``."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Service-Event": job.kind,
        "X-Service-Delivery": job.delivery_id,
        signing.HEADER: signing.sign(secret, timestamp, job.body),
    }


class Attempter:
    """Sends jobs; opened secrets are kept in memory by their sealed form (a rotation changes
    the sealed form, so the new secret is used from the next attempt on)."""

    def __init__(self, sender: Sender, sealer: Sealer, clock: Callable[[], datetime]) -> None:
        self._sender = sender
        self._clock = clock
        self._open = functools.lru_cache(maxsize=4096)(sealer.open)

    async def attempt(self, job: Job) -> Result:
        started = self._clock()
        secret = self._open(job.secret_sealed)
        outcome = await self._sender.post(
            job.url, job.body, headers(job, secret, int(started.timestamp()))
        )
        return Result(
            job=job,
            started_at=started,
            ok=outcome.ok,
            response_code=outcome.status,
            error=outcome.error,
            duration_ms=outcome.duration_ms,
            excerpt=outcome.excerpt,
        )
