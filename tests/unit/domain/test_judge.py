"""Where one attempt moves its delivery (``delivering.judge``), by what the receiver answered."""

from __future__ import annotations

from datetime import timedelta

import pytest

from clubwire.domain.delivering import Job, RetrySchedule, Status, Trigger, Verdict, judge
from tests.factories import EPOCH

SCHEDULE = RetrySchedule((60, 300))


def _job(status: Status = Status.PENDING, trigger: Trigger = Trigger.SCHEDULED) -> Job:
    return Job(
        "dlv_1", "org_a", "we_a", "registration.created", "", "", b"{}", status, 0, trigger, EPOCH
    )


@pytest.mark.parametrize("code", [None, 404, 500, 503])
def test_a_failed_first_attempt_is_retried_after_the_first_step(code: int | None) -> None:
    verdict = judge(_job(), False, EPOCH, SCHEDULE, 0, code=code)
    assert verdict == Verdict(Status.PENDING, EPOCH + timedelta(seconds=60))


def test_410_gone_kills_the_delivery_at_once_and_says_to_switch_the_endpoint_off() -> None:
    verdict = judge(_job(), False, EPOCH, SCHEDULE, 0, code=410)
    assert verdict == Verdict(Status.DEAD, None, became_dead=True, gone=True)


def test_410_on_a_manual_attempt_of_a_finished_delivery_keeps_it_and_switches_off() -> None:
    verdict = judge(_job(Status.SUCCEEDED, Trigger.MANUAL), False, EPOCH, SCHEDULE, 0, code=410)
    assert verdict == Verdict(Status.SUCCEEDED, None, gone=True)


def test_410_to_a_send_test_switches_nothing_off() -> None:
    verdict = judge(_job(trigger=Trigger.TEST), False, EPOCH, SCHEDULE, 0, code=410)
    assert verdict == Verdict(Status.DEAD, None)
