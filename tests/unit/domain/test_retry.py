"""The retry schedule: each retry due its step later, plus at most 10 % of it (DESIGN §6)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain.delivering import SPREAD, RetrySchedule

SCHEDULE = RetrySchedule()
draws = st.floats(min_value=0, max_value=1, exclude_max=True)


@given(st.integers(min_value=1, max_value=5), draws)
def test_a_retry_is_never_earlier_than_its_step_nor_later_than_its_spread(
    attempts_made: int, draw: float
) -> None:
    step = timedelta(seconds=SCHEDULE.delays[attempts_made - 1])
    delay = SCHEDULE.delay_after(attempts_made, draw)
    assert delay is not None
    assert step <= delay <= step * (1 + SPREAD)


@given(st.integers(min_value=1, max_value=5), draws, draws)
def test_a_larger_draw_is_never_sooner(attempts_made: int, one: float, other: float) -> None:
    sooner, later = (SCHEDULE.delay_after(attempts_made, d) for d in sorted((one, other)))
    assert sooner is not None
    assert later is not None
    assert sooner <= later


@pytest.mark.parametrize(("attempts_made", "seconds"), [(1, 60), (2, 300), (5, 43200)])
def test_the_smallest_draw_is_the_step_itself(attempts_made: int, seconds: int) -> None:
    assert SCHEDULE.delay_after(attempts_made, 0) == timedelta(seconds=seconds)


@pytest.mark.parametrize("attempts_made", [0, 6, 7])
def test_outside_the_schedule_there_is_no_retry(attempts_made: int) -> None:
    assert SCHEDULE.delay_after(attempts_made, 0.5) is None


def test_a_schedule_of_zeros_retries_at_once() -> None:
    """Tests and the demo shorten the schedule: a zero step stays zero."""
    assert RetrySchedule((0, 0)).delay_after(1, 0.99) == timedelta()
