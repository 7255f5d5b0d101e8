"""What the delivery engine passes between its steps (claim → attempt → judge → record):
plain values, with no database or network behind them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from clubwire.domain import delivery_rules
from clubwire.domain.delivery_rules import Status, Trigger, Verdict
from clubwire.domain.retry import RetrySchedule

TOO_MANY_REQUESTS = 429
SERVER_ERROR = 500  # and above


@dataclass(frozen=True, slots=True)
class Job:
    """A claimed delivery: everything one attempt needs. ``lease_until`` is when the lease of
    its endpoint's lane (``lease``, the lease's token) runs out, as it stood at the claim;
    a Send test has no lane (``lease`` is None)."""

    delivery_id: str
    club_id: str
    endpoint_id: str
    kind: str
    url: str
    secret_sealed: str
    body: bytes
    status: Status
    attempts_made: int
    trigger: Trigger
    lease_until: datetime
    lease: str | None = None


@dataclass(frozen=True, slots=True)
class Result:
    """What one attempt of a job gave, and where it moves the delivery (``verdict``, judged
    once, when the attempt ends); ``error`` and ``excerpt`` already safe to store and show
    (``services.delivery.outbound`` cuts and cleans them where they enter)."""

    job: Job
    started_at: datetime
    ok: bool
    response_code: int | None
    error: str | None
    duration_ms: int
    excerpt: str
    verdict: Verdict

    @property
    def strains(self) -> bool:
        """Whether the endpoint seems unable to take more now: no answer (refused, timed out,
        no TLS), 429 Too Many Requests or a 5xx. Any other failure is the message's own."""
        code = self.response_code
        return not self.ok and (code is None or code == TOO_MANY_REQUESTS or code >= SERVER_ERROR)


def judge(job: Job, ok: bool, now: datetime, schedule: RetrySchedule, draw: float) -> Verdict:
    """Where an attempt of ``job`` that was ``ok`` or not, ending ``now``, moves its
    delivery; ``draw`` (0 ≤ draw < 1, at random) places a retry within its step's spread,
    so that one endpoint's retries do not come due together."""
    attempt = job.attempts_made + 1
    return delivery_rules.judge(job.status, job.trigger, attempt, ok, now, schedule, draw)


def plain(result: Result) -> str:
    """The outcome in plain words, for the CLI and the settings UI: ``200 in 43 ms``, or
    what went wrong."""
    return plain_attempt(result.ok, result.response_code, result.duration_ms, result.error)


def plain_attempt(ok: bool, response_code: int | None, duration_ms: int, error: str | None) -> str:
    """``plain`` of an attempt as it was stored."""
    if ok:
        return f"{response_code} in {duration_ms} ms"
    reason = error or f"the receiver answered {response_code}"
    return f"failed: {reason} (after {duration_ms} ms)"
