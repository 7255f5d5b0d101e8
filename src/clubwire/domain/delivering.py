"""A delivery's life as pure rules (DESIGN §6): its states, what the delivery engine passes
between its steps (claim → attempt → judge → record) as plain values with no database or
network behind them, the retry schedule (SPEC §8), and the one ``judge`` of an attempt.

The values made for every delivery (``Job``, ``Verdict``, ``Result``, and the ``Answer`` of
``services.delivery.outbound``) are named tuples: immutable, as frozen dataclasses are, but
made in one step, where a frozen dataclass's ``__init__`` sets each field through
``object.__setattr__`` (about 3 µs a delivery more: ADR 0008, issue 38 item 3).

Each retry comes due a little after its step, by a share of the step the caller draws at
random (never earlier than the step, at most 10 % of it later), so that the deliveries of an
endpoint that failed together do not all come due in the same second.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

from clubwire.domain import event_catalog
from clubwire.domain.trace_context import TraceContext

DEAD_IN_A_ROW_LIMIT = 5
SPREAD = 0.1  # a retry comes due at most this share of its step after the step
GONE = 410  # the receiver wants no more webhooks: the endpoint is switched off at once
TOO_MANY_REQUESTS = 429
SERVER_ERROR = 500  # and above
# The answers whose Retry-After is heeded (DESIGN §6, "Receivers steer"): 429 Too Many
# Requests and 503 Service Unavailable, which RFC 6585 and RFC 9110 give one, and a gateway's
# 502 Bad Gateway and 504 Gateway Timeout when they carry one.
ASKING_TO_WAIT = frozenset({TOO_MANY_REQUESTS, 502, 503, 504})
# Why a next attempt is when it is, when the receiver chose it: before its time, for people.
ASKED = "the receiver asked to wait until"


class Status(StrEnum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    SKIPPED = "skipped"


class SkipReason(StrEnum):
    """Why a delivery was skipped (``deliveries.skipped_reason``)."""

    OFF = "off"  # its endpoint, or its club's module, was off
    ERASED = "erased"  # its event's member was erased before it was delivered

    @property
    def in_words(self) -> str:
        if self is SkipReason.OFF:
            return "its endpoint or the club's Webhooks & API module was off"
        return "its member's personal data was erased"


class Trigger(StrEnum):
    SCHEDULED = "scheduled"
    MANUAL = "manual"
    TEST = "test"


class Outcome(StrEnum):
    """One attempt's outcome in a word, for metrics and logs."""

    SUCCEEDED = "succeeded"  # a 2xx answer
    RETRYING = "retrying"  # failed; the next attempt is scheduled
    DEAD = "dead"  # failed; the delivery has no attempt left
    FAILED = "failed"  # failed; nothing follows (a Send test, a manual attempt of a finished one)


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """Attempt 1 is immediate; after failed attempt n the next is due ``delays[n - 1]`` later.

    With the default five delays, a failed sixth attempt makes the delivery dead.
    """

    delays: tuple[int, ...] = (60, 300, 1800, 7200, 43200)
    spread: float = SPREAD

    def delay_after(self, attempts_made: int, draw: float) -> timedelta | None:
        """How long to wait after ``attempts_made`` failed attempts; ``None`` means give up.

        ``draw`` (0 ≤ draw < 1, the caller's randomness) places the wait within its spread:
        the step, plus ``draw × spread`` of it.
        """
        if attempts_made < 1 or attempts_made > len(self.delays):
            return None
        step = self.delays[attempts_made - 1]
        return timedelta(seconds=step * (1 + self.spread * draw))


class Verdict(NamedTuple):
    """Where a delivery goes after an attempt, and what that means for its endpoint."""

    status: Status
    next_attempt_at: datetime | None
    became_dead: bool = False
    counts_as_success: bool = False
    gone: bool = False  # the receiver answered 410 Gone: switch the endpoint off
    asked: bool = False  # next_attempt_at is when the receiver asked (Retry-After), not the step


class Job(NamedTuple):
    """A claimed delivery: everything one attempt needs. ``lease_until`` is when the lease of
    its endpoint's lane (``lease``, the lease's token) runs out, as it stood at the claim;
    a Send test has no lane (``lease`` is None). ``headers_sealed``: the endpoint's headers of
    its own, sealed (None: it has none). ``ordering_key``: its event's, if it goes in order
    (None: it goes as soon as due); ``missed``: the sequence of an earlier delivery of its key
    that died without reaching the receiver, which it tells. ``due_at``: when it came due
    (how long it waited in the queue); ``trace``: the trace context its event was published
    in, which its attempt continues (None: tracing was off)."""

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
    headers_sealed: str | None = None
    ordering_key: str | None = None
    missed: int | None = None
    due_at: datetime | None = None
    trace: TraceContext | None = None


class Result(NamedTuple):
    """What one attempt of a job gave, and where it moves the delivery (``verdict``, judged
    once, when the attempt ends); ``error``, ``excerpt`` and the receiver's ``retry_after``
    (its ``Retry-After`` as given, None without one) already safe to store and show
    (``services.delivery.outbound`` cuts and cleans them where they enter)."""

    job: Job
    started_at: datetime
    ok: bool
    response_code: int | None
    error: str | None
    duration_ms: int
    excerpt: str
    verdict: Verdict
    retry_after: str | None = None
    # The Location of a redirect as ``error`` quotes it: the receiver's words, which may echo
    # a member's name or email, so log lines and emails leave them out (``logs.unquoted``).
    location: str | None = None
    # The attempt's own span, which its record continues (None: tracing is off).
    trace: TraceContext | None = None

    @property
    def strains(self) -> bool:
        """Whether the endpoint seems unable to take more now: no answer (refused, timed out,
        no TLS), 429 Too Many Requests or a 5xx. Any other failure is the message's own."""
        code = self.response_code
        return not self.ok and (code is None or code == TOO_MANY_REQUESTS or code >= SERVER_ERROR)


def judge(
    job: Job,
    ok: bool,
    now: datetime,
    schedule: RetrySchedule,
    draw: float,
    *,
    code: int | None = None,
    asked: datetime | None = None,
) -> Verdict:
    """Where an attempt of ``job`` that was ``ok`` or not (answered ``code``, if it was
    answered), ending ``now``, moves its delivery.

    ``draw`` (0 ≤ draw < 1, at random) places a retry within its step's spread
    (:meth:`RetrySchedule.delay_after`), so that one endpoint's retries do not come due
    together. A Send test never moves the dead-in-a-row count; a manual attempt on a finished
    delivery leaves it as it was when it fails. ``410 Gone`` kills a pending delivery at once
    and, but for a Send test, says to switch its endpoint off (``Verdict.gone``).

    ``asked`` is when the receiver's ``Retry-After`` asked the next attempt to wait until
    (``domain.retry_after``, already capped): heeded on the answers of ``ASKING_TO_WAIT``,
    and only to push the retry later than its step (``Verdict.asked``), never sooner. The
    attempt still counts as one of the schedule's: a failed last attempt is dead whatever
    the receiver asked.
    """
    gone = code == GONE
    if job.trigger is Trigger.TEST:
        return Verdict(Status.SUCCEEDED if ok else Status.DEAD, None)
    if ok:
        return Verdict(Status.SUCCEEDED, None, counts_as_success=True)
    if job.status is not Status.PENDING:
        return Verdict(job.status, None, gone=gone)
    delay = None if gone else schedule.delay_after(job.attempts_made + 1, draw)
    if delay is None:
        return Verdict(Status.DEAD, None, became_dead=True, gone=gone)
    due = now + delay
    if asked is not None and code in ASKING_TO_WAIT and asked > due:
        return Verdict(Status.PENDING, asked, asked=True)
    return Verdict(Status.PENDING, due)


class Steer(StrEnum):
    """How a receiver's answer steered its delivery or endpoint, for metrics (issue 33)."""

    RETRY_AFTER = "retry_after"  # the next attempt waits until the receiver asked
    THROTTLED = "throttled"  # no answer, 429 or 5xx: the endpoint's lane narrows
    GONE = "gone"  # 410 Gone: the endpoint is switched off


def steered(result: Result) -> list[Steer]:
    """How the attempt's answer steered what comes next: none, or one or more of ``Steer``. A
    Send test has no lane to narrow, and its 410 switches nothing off."""
    if result.job.trigger is Trigger.TEST:
        return []
    steers = [Steer.RETRY_AFTER] if result.verdict.asked else []
    steers += [Steer.THROTTLED] if result.strains else []
    return steers + ([Steer.GONE] if result.verdict.gone else [])


def outcome(verdict: Verdict, ok: bool) -> Outcome:
    """What an attempt that was ``ok`` or not, judged ``verdict``, came to."""
    if ok:
        return Outcome.SUCCEEDED
    if verdict.became_dead:
        return Outcome.DEAD
    if verdict.status is Status.PENDING:
        return Outcome.RETRYING
    return Outcome.FAILED


def retryable(kind: str) -> bool:
    """Retry applies to a delivery of any kind but a Send test's ``ping`` (send a new test)."""
    return kind != event_catalog.PING


def plain_attempt(ok: bool, response_code: int | None, duration_ms: int, error: str | None) -> str:
    """An attempt's outcome in plain words, for the CLI and the settings UI: ``200 in 43 ms``,
    or what went wrong."""
    if ok:
        return f"{response_code} in {duration_ms} ms"
    reason = error or f"the receiver answered {response_code}"
    return f"failed: {reason} (after {duration_ms} ms)"
