"""Where one attempt moves its delivery (``delivering.judge``), by what the receiver answered."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from clubwire.domain import delivering
from clubwire.domain.delivering import (
    Job,
    Result,
    RetrySchedule,
    Status,
    Steer,
    Trigger,
    Verdict,
    judge,
)
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


# -- Retry-After (``asked``: when the receiver asked, already read and capped) -------------

STEP = EPOCH + timedelta(seconds=60)  # the first retry's step, drawn at its earliest
LATER = EPOCH + timedelta(hours=1)


@pytest.mark.parametrize("code", [429, 502, 503, 504])
def test_a_later_ask_on_an_answer_asking_to_wait_moves_the_retry_to_it(code: int) -> None:
    verdict = judge(_job(), False, EPOCH, SCHEDULE, 0, code=code, asked=LATER)
    assert verdict == Verdict(Status.PENDING, LATER, asked=True)


@pytest.mark.parametrize("code", [None, 400, 404, 408, 500, 501, 505, 302])
def test_other_answers_keep_to_the_schedule_whatever_they_ask(code: int | None) -> None:
    verdict = judge(_job(), False, EPOCH, SCHEDULE, 0, code=code, asked=LATER)
    assert verdict == Verdict(Status.PENDING, STEP)


@pytest.mark.parametrize("asked", [EPOCH, EPOCH + timedelta(seconds=30), STEP])
def test_an_ask_no_later_than_the_step_never_brings_the_retry_forward(asked: datetime) -> None:
    verdict = judge(_job(), False, EPOCH, SCHEDULE, 0, code=503, asked=asked)
    assert verdict == Verdict(Status.PENDING, STEP)


def test_an_ask_within_the_steps_spread_wins_only_over_an_earlier_draw() -> None:
    asked = EPOCH + timedelta(seconds=63)  # the step is 60 to 66 seconds
    early = judge(_job(), False, EPOCH, SCHEDULE, 0, code=429, asked=asked)
    late = judge(_job(), False, EPOCH, SCHEDULE, 0.9, code=429, asked=asked)
    assert early == Verdict(Status.PENDING, asked, asked=True)
    assert late == Verdict(Status.PENDING, EPOCH + timedelta(seconds=65.4))


def test_the_last_attempt_is_dead_whatever_the_receiver_asked() -> None:
    last = _job()._replace(attempts_made=len(SCHEDULE.delays))
    verdict = judge(last, False, EPOCH, SCHEDULE, 0, code=503, asked=LATER)
    assert verdict == Verdict(Status.DEAD, None, became_dead=True)


def test_a_send_test_and_a_manual_attempt_of_a_finished_delivery_ask_nothing() -> None:
    ping = judge(_job(trigger=Trigger.TEST), False, EPOCH, SCHEDULE, 0, code=503, asked=LATER)
    assert ping == Verdict(Status.DEAD, None)
    finished = _job(Status.DEAD, Trigger.MANUAL)
    assert judge(finished, False, EPOCH, SCHEDULE, 0, code=503, asked=LATER) == Verdict(
        Status.DEAD, None
    )


def test_success_ignores_an_ask() -> None:
    verdict = judge(_job(), True, EPOCH, SCHEDULE, 0, code=200, asked=LATER)
    assert verdict == Verdict(Status.SUCCEEDED, None, counts_as_success=True)


@pytest.mark.parametrize(
    ("code", "asked", "trigger", "steered"),
    [
        (200, None, Trigger.SCHEDULED, []),
        (404, None, Trigger.SCHEDULED, []),
        (503, None, Trigger.SCHEDULED, [Steer.THROTTLED]),
        (None, None, Trigger.SCHEDULED, [Steer.THROTTLED]),
        (429, 3600, Trigger.SCHEDULED, [Steer.RETRY_AFTER, Steer.THROTTLED]),
        (429, 10, Trigger.SCHEDULED, [Steer.THROTTLED]),  # the step is later: not heeded
        (410, None, Trigger.SCHEDULED, [Steer.GONE]),
        (410, None, Trigger.TEST, []),
        (429, None, Trigger.TEST, []),
    ],
)
def test_how_an_answer_steered_is_counted(
    code: int | None, asked: int | None, trigger: Trigger, steered: list[Steer]
) -> None:
    """For the metrics (``clubwire_delivery_attempts_steered_total``): a Send test has no lane
    to narrow and switches nothing off."""
    job = _job(trigger=trigger)
    ok = code == 200
    until = None if asked is None else EPOCH + timedelta(seconds=asked)
    verdict = judge(job, ok, EPOCH, SCHEDULE, 0, code=code, asked=until)
    result = Result(job, EPOCH, ok, code, None if code else "timeout", 1, "", verdict)
    assert delivering.steered(result) == steered
