"""Delivery states and what one attempt's outcome does to them (DESIGN §6), as pure rules."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from clubwire.domain import event_catalog
from clubwire.domain.retry import RetrySchedule

DEAD_IN_A_ROW_LIMIT = 5
SWITCHED_OFF_REASON = f"Switched off after {DEAD_IN_A_ROW_LIMIT} dead deliveries in a row"


class Status(StrEnum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    SKIPPED = "skipped"


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
class Verdict:
    """Where a delivery goes after an attempt, and what that means for its endpoint."""

    status: Status
    next_attempt_at: datetime | None
    became_dead: bool = False
    counts_as_success: bool = False


def judge(
    status: Status,
    trigger: Trigger,
    attempts_made: int,
    ok: bool,
    now: datetime,
    schedule: RetrySchedule,
    draw: float,
) -> Verdict:
    """The verdict on a delivery that was ``status`` before an attempt that was ``ok`` or not.

    ``attempts_made`` counts this attempt; ``draw`` (0 ≤ draw < 1) places a retry within its
    step's spread (:meth:`RetrySchedule.delay_after`). A Send test never moves the
    dead-in-a-row count; a manual attempt on a finished delivery leaves it as it was when it
    fails.
    """
    if trigger is Trigger.TEST:
        return Verdict(Status.SUCCEEDED if ok else Status.DEAD, None)
    if ok:
        return Verdict(Status.SUCCEEDED, None, counts_as_success=True)
    if status is not Status.PENDING:
        return Verdict(status, None)
    delay = schedule.delay_after(attempts_made, draw)
    if delay is None:
        return Verdict(Status.DEAD, None, became_dead=True)
    return Verdict(Status.PENDING, now + delay)


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
