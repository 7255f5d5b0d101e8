"""Rate-limit counts shared by every API process through the database (ADR 0009): each
counter here stands for one process."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.rate_limits import WINDOW_SECONDS, Policy
from clubwire.services.club_api.rate_limits import RateCounter
from clubwire.storage.models import RateCount

POLICY = Policy("per-key", 10)
START = 1_764_000_000.0  # the start of a window


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def _takes(counter: RateCounter, count: int, bucket: str = "key:a") -> list[bool]:
    """Whether each of ``count`` requests was let through."""
    return [not counter.take(POLICY, bucket).over for _ in range(count)]


def test_a_process_alone_lets_the_quota_through_and_refuses_the_rest(
    sessions: sessionmaker[Session],
) -> None:
    counter = RateCounter(sessions, Clock())
    assert _takes(counter, 12) == [True] * 10 + [False] * 2
    refused = counter.take(POLICY, "key:a")
    assert refused.over
    assert refused.headers()["Retry-After"] == str(WINDOW_SECONDS)
    assert not counter.take(POLICY, "key:b").over  # another key counts on its own


def test_processes_hold_one_quota_together_once_they_have_shared(
    sessions: sessionmaker[Session],
) -> None:
    clock = Clock()
    first, second = RateCounter(sessions, clock), RateCounter(sessions, clock)
    assert _takes(first, 6) == [True] * 6
    assert _takes(second, 1) == [True]
    asyncio.run(first.share())
    asyncio.run(second.share())  # learns the first's six: seven of ten used
    assert _takes(second, 4) == [True, True, True, False]
    asyncio.run(second.share())
    asyncio.run(first.share())
    assert _takes(first, 1) == [False]
    with sessions() as session:
        stored = session.execute(select(RateCount.bucket, RateCount.count)).all()
    assert stored == [("key:a", 10)]


def test_a_new_window_starts_afresh_and_old_windows_are_forgotten(
    sessions: sessionmaker[Session],
) -> None:
    clock = Clock()
    counter = RateCounter(sessions, clock)
    assert _takes(counter, 11)[-1] is False
    asyncio.run(counter.share())
    clock.now += WINDOW_SECONDS
    assert _takes(counter, 1) == [True]
    asyncio.run(counter.share())
    clock.now += WINDOW_SECONDS
    assert _takes(counter, 1, "key:b") == [True]
    asyncio.run(counter.share())
    with sessions() as session:
        windows = session.scalars(select(RateCount.window_number).order_by("window_number"))
        first = int(START) // WINDOW_SECONDS
        assert list(windows) == [first + 1, first + 2]  # the oldest is gone


def test_counts_that_could_not_be_shared_are_kept_for_the_next_time(
    sessions: sessionmaker[Session],
) -> None:
    clock = Clock()
    counter = RateCounter(sessions, clock)
    _takes(counter, 3)
    broken = RateCounter(sessionmaker(), clock)  # bound to nothing: every share fails
    broken.take(POLICY, "key:a")
    with pytest.raises(Exception, match="bind"):
        asyncio.run(broken.share())
    assert broken.look(POLICY, "key:a").used == 2  # its one count, kept, and this request
    asyncio.run(counter.share())
    with sessions() as session:
        assert session.scalar(select(RateCount.count)) == 3


def test_counts_being_shared_still_count_while_the_database_answers(
    sessions: sessionmaker[Session],
) -> None:
    """While a share waits on the database (here for a transaction holding the row it adds
    to), the requests it is sharing still count: the quota is not handed out again."""
    clock = Clock()
    counter = RateCounter(sessions, clock)
    assert _takes(counter, 10) == [True] * 10
    window = int(START) // WINDOW_SECONDS

    async def meanwhile() -> list[bool]:
        with sessions.begin() as holding:
            holding.add(RateCount(bucket="key:a", window_number=window, count=0))
            holding.flush()  # the row is held (PostgreSQL), the database (SQLite)
            sharing = asyncio.create_task(counter.share())
            await asyncio.sleep(0.2)  # the share is waiting in its thread
            assert not sharing.done()
            taken = _takes(counter, 2)
            holding.rollback()
        await sharing
        return taken

    assert asyncio.run(meanwhile()) == [False, False]
    with sessions() as session:
        assert session.scalar(select(RateCount.count)) == 10
