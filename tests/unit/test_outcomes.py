"""An attempt's outcome in a word (metrics and logs), from the delivery's verdict."""

from __future__ import annotations

import pytest

from clubwire.domain import deliveries
from clubwire.domain.deliveries import Outcome, Status, Trigger
from clubwire.domain.retry import RetrySchedule
from tests.factories import EPOCH

SCHEDULE = RetrySchedule((60, 300))


@pytest.mark.parametrize(
    ("status", "trigger", "attempts_made", "ok", "expected"),
    [
        (Status.PENDING, Trigger.SCHEDULED, 1, True, Outcome.SUCCEEDED),
        (Status.PENDING, Trigger.SCHEDULED, 1, False, Outcome.RETRYING),
        (Status.PENDING, Trigger.SCHEDULED, 3, False, Outcome.DEAD),
        (Status.PENDING, Trigger.MANUAL, 2, False, Outcome.RETRYING),
        (Status.DEAD, Trigger.MANUAL, 4, False, Outcome.FAILED),
        (Status.DEAD, Trigger.MANUAL, 4, True, Outcome.SUCCEEDED),
        (Status.PENDING, Trigger.TEST, 1, False, Outcome.FAILED),
        (Status.PENDING, Trigger.TEST, 1, True, Outcome.SUCCEEDED),
    ],
)
def test_the_outcome_follows_the_verdict(
    status: Status, trigger: Trigger, attempts_made: int, ok: bool, expected: Outcome
) -> None:
    verdict = deliveries.judge(status, trigger, attempts_made, ok, EPOCH, SCHEDULE)
    assert deliveries.outcome(verdict, ok) is expected
